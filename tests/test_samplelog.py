"""The sample-log contract: loading, last-row-wins on resume, and the items × samples grid."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuneloop.errors import InputError
from tuneloop.records import append_jsonl, write_record
from tuneloop.samplelog import (
    EvalSummary,
    SampleRow,
    SamplingParams,
    load_sample_log,
    score_grid,
)


def row(item: str, k: int, status: str = "ok", score: float | None = 1.0) -> SampleRow:
    return SampleRow(
        suite_revision="r",
        item_id=item,
        sample_index=k,
        model="m",
        seed=k,
        score=score if status == "ok" else None,
        status=status,  # type: ignore[arg-type]
        tags=["add"],
    )


def write_log(folder: Path, rows: list[SampleRow]) -> Path:
    summary = EvalSummary(
        suite_path="s.jsonl",
        suite_revision="r",
        item_ids=["a", "b"],
        model="m",
        endpoint="http://x/v1",
        sampling=SamplingParams(n_samples=2, temperature=0.0, max_tokens=8),
    )
    write_record(folder / "summary.json", summary)
    append_jsonl(folder / "samples.jsonl", [r.to_json() for r in rows])
    return folder


def test_later_row_replaces_a_missing_one(tmp_path: Path) -> None:
    log = write_log(tmp_path, [row("a", 0, "missing"), row("a", 0, score=0.5)])
    _, rows = load_sample_log(log)
    assert [(r.item_id, r.status, r.score) for r in rows] == [("a", "ok", 0.5)]


def test_rows_of_another_revision_are_refused(tmp_path: Path) -> None:
    bad = row("a", 0).model_copy(update={"suite_revision": "other"})
    with pytest.raises(InputError, match=r"samples.jsonl:1: suite revision"):
        load_sample_log(write_log(tmp_path, [bad]))


def test_grid_counts_unwritten_keys_as_missing() -> None:
    rows = [row("a", 0), row("a", 1, score=0.0), row("b", 0, "harness_error"), row("z", 0)]
    grid = score_grid(rows, ["a", "b"], 2, "log")
    assert grid.values.tolist() == [[1.0, 0.0], [0.0, 0.0]]
    assert grid.ok.tolist() == [[True, True], [False, False]]
    assert grid.status == {"ok": 2, "harness_error": 1, "missing": 1}
    assert grid.tags == (("add",), ("add",))


def test_grid_refuses_sample_index_outside_budget() -> None:
    with pytest.raises(InputError, match="sample_index 2, outside 0..1"):
        score_grid([row("a", 2)], ["a"], 2, "log")
