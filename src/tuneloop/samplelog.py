"""The sample log: the contract between evaluate (writer) and report, gate and data (readers).

A sample log is a folder holding `samples.jsonl` — one `SampleRow` per (item, sample index),
appended as each completes — and `summary.json` (an `EvalSummary`) beside it. Rows with
status `missing` are written at the end of an eval for keys that never got a real completion;
readers count them as failures (score 0) in the denominator and report how many there were.

Agent items (a suite item with `tools`) extend the row, still one row per (item, sample):
`agent` holds the whole trajectory (`AgentTrace`: every message after the item's own, each
tool call with its outcome, turns, tokens, why the loop stopped) and `metrics` the outputs of
the further scorers the eval ran (`eval.metrics`), by scorer name. A row that uses either is
written as version 2 of the row schema; a plain row stays version 1, so a reader that predates
agents still reads plain logs, and refuses (by version, with "upgrade tuneloop") an agent log.
`rows_on_scorer` re-reads a log on one of those named outputs: that is how the report and the
gate work on any scorer's output (`report.scorer`, the bar's `scorer`).

An eval spread over several replicas (`tuneloop eval --endpoint A --endpoint B`) lists them,
with what each served, in the summary's `replicas` (summary version 3, written only then).
Which replica answered a sample is deliberately not in its row: the request does not depend on
the replica, so a greedy row is the same whichever one served it, and a log is comparable
with a single-endpoint log of the same eval row for row.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from tuneloop.errors import InputError
from tuneloop.records import (
    Record,
    canonical_json,
    iter_jsonl,
    parse_record,
    read_record,
    sha256_bytes,
    sha256_file,
)
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
        out = _versioned(self, super().to_json())
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
    VERSION = 5

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

    def to_json(self) -> dict[str, Any]:
        out = _versioned(self, super().to_json())
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
        return out


def _versioned(record: SampleRow | EvalSummary, out: dict[str, Any]) -> dict[str, Any]:
    """Version 2 (with `agent` and `metrics`) only for a record that uses them: a plain row or
    summary is written byte for byte as before agents, and stays readable by older readers."""
    extended = record.agent is not None or bool(record.metrics)
    out["schema"] = f"tuneloop.{record.KIND}/{2 if extended else 1}"
    if not extended:
        del out["agent"], out["metrics"]
    return out


SAMPLING_BUDGET = ("n_samples", "temperature", "top_p", "max_tokens")
"""The sampling settings two logs must share to be compared (the gate also adds `seed`)."""


def check_comparable(
    a: EvalSummary,
    b: EvalSummary,
    labels: tuple[str, str],
    fields: Sequence[str] = SAMPLING_BUDGET,
) -> None:
    """Refuse two logs of different suite revisions or sampling budgets, naming each difference.

    The one comparability rule of report and gate; `labels` name the logs in the message.
    """
    x, y = labels
    if a.suite_revision != b.suite_revision:
        raise InputError(
            f"{x} and {y} were evaluated on different suite revisions "
            f"({a.suite_revision[:12]} vs {b.suite_revision[:12]}); re-evaluate both on the "
            "same suite"
        )
    diffs = [
        f"sampling.{name}: {getattr(a.sampling, name)!r} vs {getattr(b.sampling, name)!r}"
        for name in fields
        if getattr(a.sampling, name) != getattr(b.sampling, name)
    ]
    if a.agent != b.agent:
        diffs.append(f"agent limits: {a.agent!r} vs {b.agent!r}")
    if diffs:
        raise InputError(
            f"{x} and {y} used different sampling budgets: {'; '.join(diffs)}; evaluate both "
            "with the same budget"
        )


def load_sample_log(folder: Path, scorer: str | None = None) -> tuple[EvalSummary, list[SampleRow]]:
    """Read a sample-log folder (or its samples.jsonl); errors name file and line.

    Duplicate (item, sample) keys keep the last row: a resumed eval may append a real
    completion after a `missing` row written by a run that was stopped. With `scorer`, the
    rows are scored on that scorer's output (`rows_on_scorer`).
    """
    folder = Path(folder)
    if folder.is_file():
        folder = folder.parent
    samples = folder / SAMPLES_FILE
    summary = read_record(folder / SUMMARY_FILE, EvalSummary)
    rows: dict[tuple[str, int], SampleRow] = {}
    for lineno, obj in iter_jsonl(samples):
        row = parse_record(obj, SampleRow, f"{samples}:{lineno}")
        if row.suite_revision != summary.suite_revision:
            raise InputError(
                f"{samples}:{lineno}: suite revision {row.suite_revision[:12]} differs from "
                f"the summary's {summary.suite_revision[:12]}"
            )
        rows[(row.item_id, row.sample_index)] = row
    if scorer is not None:
        return summary, rows_on_scorer(list(rows.values()), scorer, str(samples))
    return summary, list(rows.values())


def rows_on_scorer(rows: list[SampleRow], scorer: str, where: str) -> list[SampleRow]:
    """The rows with `score` taken from scorer `scorer`'s output: the row's own score where
    the row was scored by it, else `metrics[scorer]`. Status is kept (missing stays missing).
    A scored row without that output is an InputError naming the log and the eval setting."""
    out = []
    for row in rows:
        if row.status != "ok" or row.scorer == scorer:
            out.append(row)
            continue
        if scorer not in row.metrics:
            recorded = ", ".join(sorted(row.metrics)) or "none"
            raise InputError(
                f"{where}: item {row.item_id!r} sample {row.sample_index} has no output of "
                f"scorer {scorer!r} (scored by {row.scorer!r}; metrics recorded: {recorded}); "
                f"evaluate with `eval.metrics: [{scorer}]` (`--metrics`)"
            )
        out.append(row.model_copy(update={"score": row.metrics[scorer], "scorer": scorer}))
    return out


@dataclass(frozen=True)
class ScoreGrid:
    """A log's rows laid out as items × samples (the shape every statistic starts from)."""

    values: Any
    """float64 array: `SampleRow.value` (missing and errors count as 0)."""
    ok: Any
    """bool array: scored from a real completion."""
    tags: tuple[tuple[str, ...], ...]
    """Each item's tags, from its rows."""
    status: dict[str, int]
    """Rows by status; keys never written count as `missing`."""


def score_grid(
    rows: list[SampleRow], item_ids: Sequence[str], n_samples: int, where: str
) -> ScoreGrid:
    """Lay rows out on `item_ids` × `n_samples`; rows of other items are ignored."""
    import numpy as np

    index = {item: i for i, item in enumerate(item_ids)}
    values = np.zeros((len(item_ids), n_samples), dtype=np.float64)
    written = np.zeros((len(item_ids), n_samples), dtype=bool)
    ok = np.zeros((len(item_ids), n_samples), dtype=bool)
    tags: list[tuple[str, ...]] = [()] * len(item_ids)
    status = {"ok": 0, "missing": 0, "harness_error": 0}
    for row in rows:
        i = index.get(row.item_id)
        if i is None:
            continue
        if not 0 <= row.sample_index < n_samples:
            raise InputError(
                f"{where}: item {row.item_id!r} has sample_index {row.sample_index}, outside "
                f"0..{n_samples - 1} (sampling.n_samples in summary.json)"
            )
        tags[i] = tuple(row.tags) or tags[i]
        values[i, row.sample_index] = row.value
        written[i, row.sample_index] = True
        ok[i, row.sample_index] = row.status == "ok" and row.score is not None
        status[row.status] += 1
    status["missing"] += int((~written).sum())
    return ScoreGrid(values=values, ok=ok, tags=tuple(tags), status=status)


def log_sha256(folder: Path) -> str:
    """Hash of a sample log's evidence files (samples.jsonl, summary.json): what a verdict, a
    selection or a composition binds of the logs it read."""
    parts = {name: sha256_file(Path(folder) / name) for name in (SAMPLES_FILE, SUMMARY_FILE)}
    return sha256_bytes(canonical_json(parts).encode())


def items_sha256(item_ids: Sequence[str]) -> str:
    """Hash of a set of item ids, sorted: a slice's identity in the evidence and the ledger."""
    return sha256_bytes(canonical_json(sorted(item_ids)).encode())


def mean_completion_tokens(
    rows: Sequence[SampleRow], items: Collection[str] | None = None
) -> float | None:
    """Mean completion tokens per sample that reports them (of `items` only, when given): what
    an answer costs to serve, as measured on the log; None when no row reports them."""
    counts = [
        r.completion_tokens
        for r in rows
        if r.completion_tokens is not None and (items is None or r.item_id in items)
    ]
    return sum(counts) / len(counts) if counts else None
