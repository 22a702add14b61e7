"""The flips table's rows: the same items the delta report counted, with both answers."""

from __future__ import annotations

import json
from pathlib import Path

from tuneloop.records import append_jsonl, iter_jsonl
from tuneloop.report.delta import compute_delta
from tuneloop.report.flips import MAX_CHARS, read_flips
from tuneloop.samplelog import AgentTrace, load_sample_log


def test_rows_match_the_delta_counts_fixed_first(make_log) -> None:
    pre = make_log({"a": [0.0, 0.0], "b": [1.0, 1.0], "c": [1.0, 0.0], "d": [0.0, 1.0]})
    post = make_log({"a": [1.0, 1.0], "b": [0.0, 0.0], "c": [1.0, 1.0], "d": [0.0, 0.0]})
    flips = read_flips(pre, post, None, 0.5)
    delta = compute_delta(load_sample_log(pre), load_sample_log(post))
    assert [(r.item_id, r.direction) for r in flips.rows] == [
        ("a", "fixed"),
        ("b", "broken"),
        ("d", "broken"),
    ]
    assert delta.flips.wrong_to_right == 1 and delta.flips.right_to_wrong == 2
    assert flips.rows[0].pre.score == 0.0 and flips.rows[0].post.samples == 2
    assert "not here" in (flips.note or "")  # the logs name a suite that is not on disk
    only = read_flips(pre, post, ["a", "c"], 0.5)
    assert [r.item_id for r in only.rows] == ["a"]


def _edit(log: Path, **update: object) -> None:
    rows = [{**obj, **update} for _, obj in iter_jsonl(log / "samples.jsonl")]
    (log / "samples.jsonl").unlink()
    append_jsonl(log / "samples.jsonl", rows)


def test_long_completions_are_cut_and_trajectories_are_text(make_log) -> None:
    pre = make_log({"a": [0.0]})
    post = make_log({"a": [1.0]})
    _edit(pre, completion="y" * (MAX_CHARS + 50), finish_reason="length")
    trace = AgentTrace(
        messages=[
            {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "add"}}]},
            {"role": "tool", "content": "5"},
            {"role": "assistant", "content": "5"},
        ],
        turns=2,
    )
    _edit(post, agent=json.loads(trace.model_dump_json()), schema="tuneloop.sample/2")
    (row,) = read_flips(pre, post, None, 0.5).rows
    assert row.pre.text.endswith("[50 more characters not shown]") and row.pre.finish == "length"
    assert row.post.text.splitlines() == [
        "[assistant]  → calls add",
        "[tool] 5",
        "[assistant] 5",
        "[stop: answer, 2 turns]",
    ]
