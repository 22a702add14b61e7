"""The traffic log's writer under what happens to a running server's folder (the installed
`tuneloop proxy` in a subprocess, in front of a fake upstream)."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from ...installed import proxy_process, traffic_status
from ..upstreams import fake_upstream, running


@contextmanager
def proxy(tmp_path: Path, logs: Path) -> Iterator[str]:
    with (
        running(fake_upstream("up")) as upstream,
        proxy_process(tmp_path, "--upstream", f"{upstream}/v1", "--log-dir", logs) as base,
    ):
        yield base


def _chat(base: str, text: str) -> str:
    body = {"model": "up", "messages": [{"role": "user", "content": text}]}
    reply = httpx.post(f"{base}/v1/chat/completions", json=body, timeout=10)
    assert reply.status_code == 200, reply.text
    return str(reply.json()["id"])


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_a_deleted_log_folder_is_recreated_not_written_into_the_void(tmp_path: Path) -> None:
    """Issue 25 defect 9: /health said ok and counted exchanges written to an unlinked file."""
    logs = tmp_path / "traffic"
    with proxy(tmp_path, logs) as base:
        _chat(base, "before")
        deadline = time.monotonic() + 10
        while not (logs / "traffic.jsonl").read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        shutil.rmtree(logs)
        after = _chat(base, "after")
        reply = httpx.post(
            f"{base}/v1/feedback", json={"completion_id": after, "verdict": "up"}, timeout=10
        )
        assert reply.status_code == 200, reply.text  # fsynced: on disk before the answer
        health = httpx.get(f"{base}/health", timeout=10).json()["traffic"]
    assert health["ok"] and health["counts"]["recreated"] == 1
    lines = _lines(logs / "traffic.jsonl")
    assert lines[0]["request"]["messages"][0]["content"] == "after"
    assert lines[1]["completion_id"] == after


def test_a_text_completion_does_not_stall_status(tmp_path: Path) -> None:
    """Issue 25 defect 2: one /v1/completions line made `status` exit 2 for good."""
    logs = tmp_path / "traffic"
    with proxy(tmp_path, logs) as base:
        text = httpx.post(
            f"{base}/v1/completions", json={"model": "up", "prompt": "Once upon"}, timeout=10
        )
        assert text.status_code == 200, text.text
        cid = _chat(base, "2 + 2")
        reply = httpx.post(
            f"{base}/v1/feedback",
            json={"completion_id": cid, "verdict": "down", "correction": "4"},
            timeout=10,
        )
        assert reply.status_code == 200, reply.text
    assert len(_lines(logs / "traffic.jsonl")) == 3
    traffic = traffic_status(tmp_path)
    assert (traffic["exchanges"], traffic["new_labels"], traffic["skipped_lines"]) == (2, 1, [])


def test_a_torn_line_after_a_crash_is_skipped_not_a_stall(tmp_path: Path) -> None:
    """Issue 25 defect 3: a crash tore the last line; the restarted server appended after it
    and `status` failed on that line for good. The writer starts a fresh line; the reader
    skips the torn one (named in a warning) and reads the rest."""
    logs = tmp_path / "traffic"
    logs.mkdir()
    (logs / "traffic.jsonl").write_text('{"timestamp": "2026-12-01T00:00:00Z", "requ')
    with proxy(tmp_path, logs) as base:
        cid = _chat(base, "2 + 2")
        reply = httpx.post(
            f"{base}/v1/feedback", json={"completion_id": cid, "verdict": "up"}, timeout=10
        )
        assert reply.status_code == 200, reply.text
    raw = (logs / "traffic.jsonl").read_text().splitlines()
    assert raw[0] == '{"timestamp": "2026-12-01T00:00:00Z", "requ' and len(raw) == 3
    traffic = traffic_status(tmp_path)
    assert traffic["new_labels"] == 1
    (skipped,) = traffic["skipped_lines"]
    assert "traffic.jsonl:1: not a JSON line" in skipped and skipped in traffic["stderr"]
