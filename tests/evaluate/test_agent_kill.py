"""`tuneloop eval` on an agent suite killed with SIGKILL mid-run, then rerun: the finished log
is exactly an uninterrupted run's, and no sample finished before the kill is asked again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tuneloop.evaluate import EvalSettings, evaluate
from tuneloop.records import parse_record
from tuneloop.samplelog import SampleRow, load_sample_log

METRICS = "[tool_call_valid, tool_match, redundant_calls, failed_calls, turns, tokens]"


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def _rows_written(out: Path) -> list[SampleRow]:
    """The rows on disk at the kill (a torn last line is not a row yet)."""
    rows = []
    for line in (out / "samples.jsonl").read_text().split("\n"):
        try:
            rows.append(parse_record(json.loads(line), SampleRow, "samples.jsonl"))
        except ValueError:
            continue
    return rows


def _log(out: Path) -> dict:
    summary, rows = load_sample_log(out)
    return {
        "counts": summary.counts,
        "rows": {(r.item_id, r.sample_index): r.model_dump(exclude={"latency_s"}) for r in rows},
    }


def test_kill_9_mid_run_then_rerun_gives_the_same_log(agent_server, kit, tmp_path) -> None:
    state = agent_server.state
    reference = tmp_path / "reference"
    settings = EvalSettings(
        n_samples=3, max_turns=4, concurrency=1, metrics=METRICS.strip("[]").split(", ")
    )
    evaluate(agent_server.url, "fake", kit.AGENT_SUITE, reference, settings, progress=False)
    state.requests.clear()
    state.delay_s = 0.03

    out = tmp_path / "out"
    argv = [
        str(Path(sys.executable).parent / "tuneloop"),
        "eval",
        "--endpoint", agent_server.url,
        "--model", "fake",
        "--suite", str(kit.AGENT_SUITE),
        "--out", str(out),
        "--n-samples", "3",
        "--max-turns", "4",
        "--concurrency", "1",
        "--metrics", METRICS,
        "--no-progress",
    ]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while _lines(out / "samples.jsonl") < 8 and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    finished = {(r.item_id, r.sample_index): r.seed for r in _rows_written(out)}
    assert 8 <= len(finished) < 27
    asked_before = len(state.requests)

    state.delay_s = 0.0
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "ok 27" in done.stdout
    assert _log(out) == _log(reference)
    # every first turn of a sample finished before the kill was sent exactly once
    first_turns = [s for _, turn, s in state.requests if turn == 0]
    assert all(first_turns.count(seed) == 1 for seed in finished.values())
    print(
        f"killed after {len(finished)} of 27 samples ({asked_before} requests); the rerun sent "
        f"{len(state.requests) - asked_before} requests"
    )
