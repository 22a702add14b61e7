"""The sample log: the contract between evaluate (writer) and report, gate and data (readers).

A sample log is a folder holding `samples.jsonl` — one `SampleRow` per (item, sample index),
appended as each completes — and `summary.json` (an `EvalSummary`) beside it. Rows with
status `missing` are written at the end of an eval for keys that never got a real completion;
readers count them as failures (score 0) in the denominator and report how many there were.
"""

from __future__ import annotations

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
