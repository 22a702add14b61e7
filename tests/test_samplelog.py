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


def test_a_plain_row_stays_version_1_and_an_agent_row_is_version_2() -> None:
    from tuneloop.records import parse_record
    from tuneloop.samplelog import AgentTrace

    plain = row("a", 0)
    assert plain.to_json()["schema"] == "tuneloop.sample/1"
    agent = plain.model_copy(update={"agent": AgentTrace(turns=2)})
    agent = SampleRow.model_validate(agent.model_dump())  # as built by the runner
    assert agent.to_json()["schema"] == "tuneloop.sample/2"
    metric = SampleRow.model_validate({**plain.model_dump(), "metrics": {"turns": 0.5}})
    assert metric.to_json()["schema"] == "tuneloop.sample/2"
    # read back (and rewritten by a resume's compaction) with the same version as written
    assert parse_record(plain.to_json(), SampleRow, "x").to_json() == plain.to_json()
    assert parse_record(agent.to_json(), SampleRow, "x").to_json() == agent.to_json()


def test_rows_on_scorer_reads_a_named_output(tmp_path: Path) -> None:
    from tuneloop.samplelog import rows_on_scorer

    scored = SampleRow.model_validate({**row("a", 0).model_dump(), "metrics": {"turns": 0.25}})
    missing = row("b", 0, status="missing")
    out = rows_on_scorer([scored, missing], "turns", "log")
    assert [(r.value, r.scorer, r.status) for r in out] == [
        (0.25, "turns", "ok"),
        (0.0, None, "missing"),
    ]
    with pytest.raises(InputError, match="log: item 'a' sample 0 has no output of scorer 'x'"):
        rows_on_scorer([scored], "x", "log")


def test_plain_rows_and_summaries_are_written_as_before_agents() -> None:
    plain = row("a", 0).to_json()
    assert "agent" not in plain and "metrics" not in plain
    summary = EvalSummary(
        suite_path="s",
        suite_revision="r",
        item_ids=["a"],
        model="m",
        endpoint="e",
        sampling=SamplingParams(n_samples=1, temperature=0.0, max_tokens=8),
    )
    assert summary.to_json()["schema"] == "tuneloop.eval_summary/1"
    assert "agent" not in summary.to_json() and "metrics" not in summary.to_json()
    assert summary.model_copy(update={"metrics": ["turns"]}).to_json()["metrics"] == ["turns"]
