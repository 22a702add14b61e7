"""Reading sample logs: load one (`load_sample_log`), check two are comparable
(`check_comparable`), re-read one on a named scorer's output (`rows_on_scorer`), the item ×
sample score grid, and the hashes a verdict or a composition binds a log and its items by."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuneloop.errors import InputError
from tuneloop.records import (
    canonical_json,
    iter_jsonl,
    parse_record,
    read_record,
    sha256_bytes,
    sha256_file,
)
from tuneloop.samplelog.rows import SAMPLES_FILE, SUMMARY_FILE, SampleRow
from tuneloop.samplelog.summary import EvalSummary

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
