"""The sample log: the contract between evaluate (writer) and report, gate and data (readers).

A sample log is a folder holding `samples.jsonl` — one `SampleRow` per (item, sample index),
appended as each completes — and `summary.json` (an `EvalSummary`) beside it. Rows with
status `missing` are written at the end of an eval for keys that never got a real completion;
readers count them as failures (score 0) in the denominator and report how many there were.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from tuneloop.errors import InputError
from tuneloop.records import Record, iter_jsonl, parse_record, read_record

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


class SampleRow(Record):
    """One (item, sample index) of an eval."""

    KIND = "sample"
    VERSION = 1

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

    @property
    def value(self) -> float:
        """The score used in statistics: missing and errors count as 0 (conservative)."""
        return float(self.score) if self.status == "ok" and self.score is not None else 0.0


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


class EvalSummary(Record):
    """Settings and totals of one eval, written beside samples.jsonl."""

    KIND = "eval_summary"
    VERSION = 1

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
    if diffs:
        raise InputError(
            f"{x} and {y} used different sampling budgets: {'; '.join(diffs)}; evaluate both "
            "with the same budget"
        )


def load_sample_log(folder: Path) -> tuple[EvalSummary, list[SampleRow]]:
    """Read a sample-log folder (or its samples.jsonl); errors name file and line.

    Duplicate (item, sample) keys keep the last row: a resumed eval may append a real
    completion after a `missing` row written by a run that was stopped.
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
    return summary, list(rows.values())


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
