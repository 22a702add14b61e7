"""A sample log's summary: the eval's settings and totals (`EvalSummary`), how each arm was
served (`ServedAs`, `ServedArtifact`), the replicas it was spread over and an agent's budget.
The package face (`tuneloop.samplelog`) says what a log is."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from tuneloop.records import Record
from tuneloop.records.judge import JudgeIdentity
from tuneloop.samplelog.rows import SamplingParams, versioned


class ServedArtifact(BaseModel):
    """What answered an arm: the weights (or adapter on its base) by hash, and the server's own
    word for what it loaded. The verdict's evidence hashes the log this is part of."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["model", "adapter"]
    """A model folder, or a LoRA adapter served on the base without merging."""
    path: str
    """The folder the server was given (the adapter's, for an adapter)."""
    sha256: str
    """sha256 of that folder, as the runner hashed it for this phase."""
    base_sha256: str | None = None
    """An adapter's base model (the folder it was served on)."""
    served_id: str
    """The model name every request of the arm named."""
    reported: dict[str, str] | None = None
    """The server's `GET /v1/models` entry for `served_id` (vLLM: `root`, the folder it
    loaded, and `parent` for an adapter); None when it lists no such model."""


class ServedAs(BaseModel):
    """How the evaluated model was served: what makes two arms' logs comparable besides the
    sampling budget. Written by the loop beside the eval's own settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    arm: Literal["pre", "post"]
    """Which side of the comparison this log is."""
    backend: str
    """The serving backend (`embedded`, `vllm`, `external`, a plugin)."""
    stop_token_ids: list[int] | None = None
    """The decoding contract's stop ids the server applied to this arm (the same for both
    arms); None when the backend could not apply one (an external endpoint)."""
    aa_control: bool = False
    """True for a deliberate A/A control: pre and post are the same external model."""
    artifact: ServedArtifact | None = None
    """What answered (None for an external endpoint, which names its model instead)."""


class ReplicaUse(BaseModel):
    """One replica of an eval spread over several, and what it did in the last run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    endpoint: str
    """The replica's base URL."""
    served: int
    """Requests it answered (agent items: one per model turn)."""
    failed: int
    """Attempts on it that failed for infrastructure reasons, each retried on another."""


class AgentBudget(BaseModel):
    """The limits of the agent loop: part of the budget two logs must share to be compared."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_turns: int
    """Model turns per sample before the trajectory is cut off as unfinished."""
    token_budget: int | None = None
    """Prompt + completion tokens per sample (summed over turns) before it is cut off."""


class EvalSummary(Record):
    """Settings and totals of one eval, written beside samples.jsonl."""

    KIND = "eval_summary"
    VERSION = 6

    suite_path: str
    suite_revision: str
    slice: str | None = None
    """The slice evaluated; None means the whole suite."""
    item_ids: list[str]
    """Items evaluated, in suite order."""
    model: str
    endpoint: str
    sampling: SamplingParams
    counts: dict[str, int] = {}
    """Totals by status, plus `expected` (items × samples)."""
    mean_score: float | None = None
    """Mean item score with missing as 0."""
    started_at: str | None = None
    finished_at: str | None = None
    duration_s: float | None = None
    retries: int = 0
    """Infrastructure retries performed (never scored)."""
    served_as: ServedAs | None = None
    """How the model was served (arm, backend, decoding contract, A/A control); None for an
    eval run outside the loop."""
    agent: AgentBudget | None = None
    """The agent loop's limits when the evaluated items include agent items; None otherwise."""
    metrics: list[str] = []
    """The further scorers run on every sample (`eval.metrics`), recorded in each row."""
    replicas: list[ReplicaUse] = []
    """The replicas the eval was spread over (`endpoint` is the first), with the requests each
    answered in the last run; empty for a single endpoint (and then not written)."""
    usd_per_1m: float | None = None
    """The price per million completion tokens each row's `cost_usd` was computed with
    (`eval.usd_per_1m`); None when rows carry no cost or a cascade reported its own."""
    judge: JudgeIdentity | None = None
    """The LLM judge items scored `judge` were graded by (`eval.judge`); None: no judge."""
    judge_cost_usd: float | None = None
    """What the judge's grades of this log cost (cached grades at what they cost to make);
    None without a judge or without the judge's usage."""

    def to_json(self) -> dict[str, Any]:
        out = versioned(self.KIND, super().to_json())
        if self.replicas:
            out["schema"] = "tuneloop.eval_summary/3"
        else:
            del out["replicas"]
        if self.sampling.logprobs:  # version 4: rows with confidences
            out["schema"] = "tuneloop.eval_summary/4"
        else:
            del out["sampling"]["logprobs"]
        if self.usd_per_1m is not None:  # version 5: priced rows
            out["schema"] = "tuneloop.eval_summary/5"
        else:
            del out["usd_per_1m"]
        if self.judge is not None:  # version 6: judged rows
            out["schema"] = "tuneloop.eval_summary/6"
        else:
            del out["judge"], out["judge_cost_usd"]
        return out
