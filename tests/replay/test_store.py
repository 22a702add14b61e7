"""Reusing finished calls from earlier call logs (`store.carry_over`): a replay into a fresh
folder — the loop's redone replay phase — pays only for calls no earlier log answered."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuneloop.config.replay import ReplayConfig
from tuneloop.records import read_jsonl
from tuneloop.replay import replay
from tuneloop.replay.store import CALLS_FILE, call_id, carry_over, load_calls

PAIRS = [(1, 2), (2, 2), (3, 4), (5, 5)]


def _setup(tmp_path: Path, kit, url: str) -> tuple[Path, Path]:
    traces = kit.write_traces(
        tmp_path / "traces.jsonl", [kit.arith_trace(i, a, b) for i, (a, b) in enumerate(PAIRS)]
    )
    price = {"input_per_1m": 2.0, "output_per_1m": 20.0}
    teachers = kit.write_teachers(
        tmp_path / "teachers.yaml",
        url,
        [{"name": "right", "price": price}, {"name": "flaky", "price": price, "max_retries": 0}],
    )
    return traces, teachers


def test_a_fresh_folder_reuses_the_finished_calls_of_an_earlier_log(
    tmp_path, teachers_server, kit
) -> None:
    traces, teachers = _setup(tmp_path, kit, teachers_server.url)
    settings = ReplayConfig(concurrency=4)
    first = replay(traces, teachers, tmp_path / "a", settings).report
    state = teachers_server.state
    assert (state.calls_for("right"), state.calls_for("flaky")) == (4, 4)  # flaky: all missing

    earlier = [tmp_path / "nothing" / CALLS_FILE, tmp_path / "a" / CALLS_FILE]
    second = replay(traces, teachers, tmp_path / "b", settings, earlier=earlier).report
    # right's 4 answers are carried over, flaky's missing ones asked again
    assert (state.calls_for("right"), state.calls_for("flaky")) == (4, 8)
    assert second.reused_from == {str(tmp_path / "a" / CALLS_FILE): 4}
    assert second.calls_reused == 4 and second.calls_this_run == 4
    call_cost = (100 * 2.0 + 10 * 20.0) / 1e6
    assert second.cost_usd_this_run == pytest.approx(4 * call_cost)  # flaky's only
    assert second.cost_usd == pytest.approx(first.cost_usd + 4 * call_cost)
    assert read_jsonl(tmp_path / "b" / "sft.jsonl") == read_jsonl(tmp_path / "a" / "sft.jsonl")
    assert (
        f"Reused from an earlier replay's log: 4 calls from {tmp_path / 'a'}"
        in (tmp_path / "b" / "report.md").read_text()
    )
    # the new log holds the carried rows: resuming it in place asks nothing
    assert len(load_calls(tmp_path / "b" / CALLS_FILE)) == 8
    third = replay(traces, teachers, tmp_path / "b", settings).report
    assert (state.calls_for("right"), state.calls_for("flaky")) == (4, 8)
    assert third.calls_this_run == 0 and third.reused_from == {}


def test_carry_over_takes_only_wanted_finished_calls_first_log_first(
    tmp_path, teachers_server, kit
) -> None:
    traces, teachers = _setup(tmp_path, kit, teachers_server.url)
    replay(traces, teachers, tmp_path / "a", ReplayConfig(concurrency=4))
    log = load_calls(tmp_path / "a" / CALLS_FILE)
    right = sorted(c for c, r in log.items() if r.teacher == "right")
    missing = [c for c, r in log.items() if r.status == "missing"]
    logs = [tmp_path / "a" / CALLS_FILE, tmp_path / "a" / CALLS_FILE]
    rows, taken = carry_over({}, right[:2] + missing, logs)
    assert sorted(call_id(r) for r in rows) == right[:2]  # missing rows are asked again
    assert taken == {str(tmp_path / "a" / CALLS_FILE): 2}  # the second log found nothing new
    already = {right[0]: log[right[0]]}
    rows, _ = carry_over(already, right[:2], logs)
    assert [call_id(r) for r in rows] == [right[1]]
