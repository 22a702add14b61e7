"""`tuneloop replay` killed with SIGKILL mid-run, then rerun: no finished call is paid again,
and the cost report says so (what was reused, what this run paid)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tuneloop.records import read_jsonl, read_record
from tuneloop.records.replay import ReplayReport

PRICE = {"input_per_1m": 3.0, "output_per_1m": 15.0}
CALL_COST = (100 * 3.0 + 10 * 15.0) / 1e6


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def test_kill_9_resumes_without_paying_twice(tmp_path, teachers_server, kit) -> None:
    state = teachers_server.state
    state.delay_s = 0.15
    traces = kit.write_traces(
        tmp_path / "traces.jsonl", [kit.arith_trace(i, i, i + 1) for i in range(12)]
    )
    teachers = kit.write_teachers(
        tmp_path / "teachers.yaml", teachers_server.url, [{"name": "right", "price": PRICE}]
    )
    out = tmp_path / "out"
    argv = [
        str(Path(sys.executable).parent / "tuneloop"),
        "replay",
        "--traces",
        str(traces),
        "--teachers",
        str(teachers),
        "--out",
        str(out),
        "--concurrency",
        "2",
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while _lines(out / "calls.jsonl") < 4 and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    finished = {(r["trace"], r["step"]) for r in read_jsonl(out / "calls.jsonl")}
    paid_before = sum(state.calls.values())
    assert 4 <= len(finished) < 12 and not (out / "report.json").exists()

    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = read_record(out / "report.json", ReplayReport)
    assert all(n == 1 for n in _calls_by_prompt(state, finished).values())  # none asked again
    repaid = sum(state.calls.values()) - 12  # in flight at the kill: unrecorded, asked again
    assert 0 <= repaid <= 2
    assert report.calls_reused == len(finished)
    assert report.calls_this_run == 12 - len(finished)
    assert report.cost_usd_this_run == pytest.approx((12 - len(finished)) * CALL_COST)
    assert report.cost_usd == pytest.approx(12 * CALL_COST)
    assert report.sft_rows == 12 and paid_before >= len(finished)
    print(
        f"killed after {len(finished)} finished calls ({paid_before} requests sent); rerun "
        f"made {report.calls_this_run} calls, {repaid} of them repeats of calls in flight at "
        f"the kill; cost this run {report.cost_usd_this_run:.6f}, total {report.cost_usd:.6f}"
    )


def _calls_by_prompt(state, finished: set[tuple[str, int]]) -> dict[str, int]:
    """Requests received per finished trace (its prompt names the trace's numbers)."""
    out = {}
    for (_model, conversation), n in state.calls.items():
        question = json.loads(conversation)[-1]["content"]
        i = int(question.split()[2])  # "What is i + (i+1)?"
        if (f"arith/t{i}", 2) in finished:
            out[question] = n
    return out
