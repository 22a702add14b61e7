"""A sample log's rows: one `SampleRow` per (item, sample index), with the settings it was
sampled under (`SamplingParams`), an answer's `Confidence`, and an agent item's trajectory
(`AgentTrace`, `ToolCall`). The package face (`tuneloop.samplelog`) says what a log is."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from tuneloop.records import Record
from tuneloop.tiers import CascadeTrace

Status = Literal["ok", "harness_error", "missing"]

SAMPLES_FILE = "samples.jsonl"
SUMMARY_FILE = "summary.json"


class SamplingParams(BaseModel):
    """Sampling settings shared by every request of one eval."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n_samples: int
    """Samples per item."""
    temperature: float
    """Sampling temperature (0 = greedy)."""
    top_p: float = 1.0
    """Nucleus mass."""
    max_tokens: int
    """Completion length limit."""
    seed: int = 0
    """Base seed; per-sample seeds derive from (seed, item id, sample index)."""
    logprobs: bool = False
    """Each request asked for token log-probabilities (`eval.logprobs`); rows carry their
    `confidence`."""


class Confidence(BaseModel):
    """How sure the model was of one answer, from the log-probabilities its server returned."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mean_logprob: float
    """Mean log-probability of the answer's tokens (≤ 0; 0 is certain)."""
    min_margin: float | None
    """Smallest difference, over the answer's tokens, between the log-probabilities of the two
    most likely tokens at that position (≥ 0); None when the server gave one alternative."""
    tokens: int
    """Answer tokens the figures are over."""


CallStatus = Literal["ok", "invalid_json", "unknown_tool", "invalid_arguments", "failed"]
AgentStop = Literal["answer", "max_turns", "token_budget"]


class ToolCall(BaseModel):
    """One tool call of a trajectory and what became of it."""

    model_config = ConfigDict(extra="forbid")

    turn: int
    """The model turn (0-based) that made the call."""
    id: str
    """The call's id as the model gave it (or `call_<turn>_<j>` when it gave none)."""
    name: str
    """The tool name the model asked for (may be unknown)."""
    arguments: Any = None
    """The parsed arguments; None when they were not valid JSON."""
    raw_arguments: str = ""
    """The arguments exactly as the model wrote them."""
    status: CallStatus = "ok"
    """ok; invalid_json, unknown_tool, invalid_arguments (against the tool's JSON schema):
    refused before running, returned to the model as a tool error; failed: the tool ran and
    raised (a model-side outcome, never an infrastructure error)."""
    result: str | None = None
    """The tool message content returned to the model (the result, or the error)."""
    error: str | None = None
    """Why the call was refused or failed; None when status is ok."""


class AgentTrace(BaseModel):
    """The trajectory of one agent sample: everything after the item's own messages."""

    model_config = ConfigDict(extra="forbid")

    version: int = 1
    """Version of this extension of the row."""
    messages: list[dict[str, Any]] = []
    """The assistant turns (with `tool_calls`) and `tool` results, in order, as sent back."""
    calls: list[ToolCall] = []
    """Every tool call, in order."""
    turns: int = 0
    """Model turns taken (requests answered)."""
    prompt_tokens: int = 0
    """Prompt tokens summed over turns (as the server reported them)."""
    completion_tokens: int = 0
    """Completion tokens summed over turns."""
    stop: AgentStop = "answer"
    """answer: a turn without tool calls (the final answer); max_turns / token_budget: the
    loop was cut off, the trajectory is unfinished and scores as such."""
    max_turns: int = 8
    """The turn limit the loop ran under."""
    token_budget: int | None = None
    """The token budget (prompt + completion over turns) it ran under; None: none."""

    @property
    def finished(self) -> bool:
        return self.stop == "answer"

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def answer(self) -> str:
        """The final assistant text ('' when the last turn had none)."""
        for message in reversed(self.messages):
            if message.get("role") == "assistant":
                content = message.get("content")
                return content if isinstance(content, str) else ""
        return ""


class SampleRow(Record):
    """One (item, sample index) of an eval."""

    KIND = "sample"
    VERSION = 4

    suite_revision: str
    """sha256 of the suite's canonical content."""
    item_id: str
    """The suite item's id."""
    sample_index: int
    """0 .. n_samples-1."""
    model: str
    """Model identity: served name, plus weights hash when known (`name@sha256:…`)."""
    seed: int
    """The per-sample seed sent with the request."""
    completion: str | None = None
    """The completion text (None when status is not ok)."""
    finish_reason: str | None = None
    """`stop` or `length` as the server reported it."""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float | None = None
    """Wall time of the successful request."""
    score: float | None = None
    """Score in [0, 1] from the scorer; None unless status is ok."""
    scorer: str | None = None
    """Registered scorer name."""
    detail: dict[str, Any] = {}
    """Scorer detail (extracted answer, reason)."""
    status: Status = "ok"
    """ok: scored from a real completion; harness_error: the scorer itself failed;
    missing: no completion after all retries (counts as a failure)."""
    error: str | None = None
    """Last infrastructure or harness error for non-ok rows."""
    tags: list[str] = []
    """The item's tags, copied for per-tag breakdowns."""
    agent: AgentTrace | None = None
    """The trajectory of an agent item (one with `tools`); None for a single-turn item."""
    metrics: dict[str, float] = {}
    """Outputs of the further scorers the eval ran (`eval.metrics`), by scorer name, each in
    [0, 1]; empty unless status is ok."""
    confidence: Confidence | None = None
    """The answer's confidence from its token log-probabilities (`eval.logprobs`); None when
    not asked for, or for an agent item."""
    cost_usd: float | None = None
    """What the sample cost in dollars: as a cascade reported it (every tier asked), or the
    completion tokens × `eval.usd_per_1m`; None when neither is known."""
    cascade: CascadeTrace | None = None
    """How a cascade answered (the tier, each tier's confidence, latency and cost:
    `tuneloop.tiers`); None for a single model."""

    def to_json(self) -> dict[str, Any]:
        out = versioned(self.KIND, super().to_json())
        if self.confidence is None:
            del out["confidence"]
        else:  # version 3: a reader that predates confidences refuses the row
            out["schema"] = "tuneloop.sample/3"
        if self.cost_usd is None and self.cascade is None:
            del out["cost_usd"], out["cascade"]
        else:  # version 4: rows with a cost or a cascade's tier
            out["schema"] = "tuneloop.sample/4"
            if self.cascade is None:
                del out["cascade"]
        return out

    @property
    def value(self) -> float:
        """The score used in statistics: missing and errors count as 0 (conservative)."""
        return float(self.score) if self.status == "ok" and self.score is not None else 0.0


def versioned(kind: str, out: dict[str, Any]) -> dict[str, Any]:
    """Version 2 (with `agent` and `metrics`) only for a row or summary `out` that uses them:
    a plain one is written byte for byte as before agents, and stays readable by older
    readers."""
    extended = out["agent"] is not None or bool(out["metrics"])
    out["schema"] = f"tuneloop.{kind}/{2 if extended else 1}"
    if not extended:
        del out["agent"], out["metrics"]
    return out
