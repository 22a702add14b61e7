"""Fault injection: a proxy that drops ~10% of requests, a server that answers 500 ~10% of
the time, and the server killed and restarted mid-run. The finished log must hold every
(item, sample) exactly once, each scored from a real completion; no infrastructure error may
appear as a score."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from tuneloop.evaluate import EvalSettings, evaluate
from tuneloop.records import read_jsonl
from tuneloop.suite import item_prompt_text, load_suite


def _rows_written(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def test_drops_500s_and_a_restart_never_reach_a_score(small_suite, tmp_path, kit) -> None:
    state = kit.FakeState(error_rate=0.1, delay_s=0.01)
    server = kit.ServerThread(state)
    proxy = kit.DroppingProxy(server.port, drop_rate=0.1)
    out = tmp_path / "out"
    settings = EvalSettings(
        n_samples=8, concurrency=8, max_retries=10, backoff_s=0.05, request_timeout_s=5
    )
    result: dict[str, object] = {}

    def eval_thread() -> None:
        try:
            result["summary"] = evaluate(
                proxy.url, "fake", small_suite, out, settings, progress=False
            )
        except BaseException as err:  # surfaced by the assertion below
            result["error"] = err

    thread = threading.Thread(target=eval_thread)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while _rows_written(out / "samples.jsonl") < 60 and time.monotonic() < deadline:
            time.sleep(0.01)
        server.stop()  # killed mid-run: in-flight requests fail, new ones are refused
        rows_at_kill = _rows_written(out / "samples.jsonl")
        time.sleep(0.5)
        server.start()  # same port
        thread.join(60)
    finally:
        proxy.close()
        server.stop()

    assert "error" not in result, result.get("error")
    assert 60 <= rows_at_kill < 240, "the restart must happen mid-run"
    summary = result["summary"]
    rows = read_jsonl(out / "samples.jsonl")
    keys = [(r["item_id"], r["sample_index"]) for r in rows]
    assert len(keys) == len(set(keys)) == 240  # every key exactly once
    prompts = {i.id: item_prompt_text(i) for i in load_suite(small_suite).items}
    for row in rows:
        assert row["status"] == "ok" and row["error"] is None
        assert row["completion"].startswith("The answer is")
        assert row["score"] == kit.expected_score(prompts[row["item_id"]])
    assert summary.counts["missing"] == 0 and summary.counts["ok"] == 240  # type: ignore[attr-defined]
    assert summary.retries > 0 and proxy.dropped > 0  # type: ignore[attr-defined]
