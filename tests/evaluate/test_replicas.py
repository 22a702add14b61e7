"""An eval spread over several replicas: same rows as one endpoint, a dead replica routed around.

The fast tests use the fake server of conftest.py; the end-to-end one runs the installed
`tuneloop eval` against two real `tuneloop serve` processes on examples/arith/model and kills
one (SIGKILL) mid-run.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.evaluate.conftest import FakeState, ServerThread, expected_score
from tuneloop.errors import InputError
from tuneloop.evaluate import EvalSettings, evaluate
from tuneloop.records import read_record
from tuneloop.samplelog import EvalSummary

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "examples" / "arith" / "model"
SUITE = ROOT / "examples" / "arith" / "suite.jsonl"
_BESIDE = Path(sys.executable).with_name("tuneloop")
TUNELOOP = str(_BESIDE) if _BESIDE.is_file() else shutil.which("tuneloop")


def _suite(path: Path, n: int = 40) -> Path:
    lines = [
        json.dumps({"id": f"q{i}", "prompt": f"What is {i} + {2 * i}?", "answer": str(3 * i)})
        for i in range(n)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def _rows(out: Path) -> dict[tuple[str, int], dict]:
    """Each row without its timing (the one field that differs between two runs)."""
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    keyed = {(r["item_id"], r["sample_index"]): r for r in rows}
    assert len(keyed) == len(rows), "a key was written twice"
    for r in rows:
        r.pop("latency_s")
    return keyed


def _dead_url() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there: every connect is refused
    return f"http://127.0.0.1:{port}"


def test_a_dead_replica_is_routed_around_and_rows_match_one_endpoint(tmp_path: Path) -> None:
    suite = _suite(tmp_path / "suite.jsonl")
    live = ServerThread(FakeState())
    try:
        settings = EvalSettings(n_samples=2, concurrency=4, backoff_s=0.05)
        single = evaluate(live.url, "m", suite, tmp_path / "one", settings, progress=False)
        spread = evaluate(
            [_dead_url(), live.url], "m", suite, tmp_path / "two", settings, progress=False
        )
    finally:
        live.stop()
    assert _rows(tmp_path / "one") == _rows(tmp_path / "two")
    assert spread.counts == single.counts == {**single.counts, "ok": 80, "missing": 0}
    dead, alive = spread.replicas
    assert (dead.served, alive.served) == (0, 80) and dead.failed >= 1
    stored = json.loads((tmp_path / "two" / "summary.json").read_text())
    assert stored["schema"] == "tuneloop.eval_summary/3"
    assert read_record(tmp_path / "two" / "summary.json", EvalSummary).replicas == spread.replicas
    assert "replicas" not in json.loads((tmp_path / "one" / "summary.json").read_text())


def test_both_replicas_share_the_work_and_all_failing_leaves_samples_missing(
    tmp_path: Path,
) -> None:
    suite = _suite(tmp_path / "suite.jsonl", n=60)
    a, b = ServerThread(FakeState(delay_s=0.01)), ServerThread(FakeState(delay_s=0.01))
    try:
        settings = EvalSettings(concurrency=2)
        done = evaluate([a.url, b.url], "m", suite, tmp_path / "ab", settings, progress=False)
    finally:
        a.stop(), b.stop()
    assert done.counts["ok"] == 60 and a.state.requests + b.state.requests == 60
    assert min(a.state.requests, b.state.requests) >= 15  # least-busy routing uses both
    for row in _rows(tmp_path / "ab").values():
        assert row["score"] == expected_score(row["completion"].replace("The answer is", ""))
    flaky = ServerThread(FakeState(error_rate=1.0))
    try:
        settings = EvalSettings(max_retries=3, backoff_s=0.0)
        with pytest.raises(Exception, match="no request to"):
            evaluate([flaky.url, _dead_url()], "m", _suite(tmp_path / "s2.jsonl", 3), tmp_path /
                     "bad", settings, progress=False)  # fmt: skip
    finally:
        flaky.stop()
    rows = _rows(tmp_path / "bad")
    assert {r["status"] for r in rows.values()} == {"missing"}  # never scored
    assert all(r["score"] is None and "after 3 retries" in r["error"] for r in rows.values())


def test_an_endpoint_given_twice_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="given twice"):
        evaluate(["http://h:1", "http://h:1"], "m", _suite(tmp_path / "s.jsonl"), tmp_path / "o",
                 EvalSettings(), progress=False)  # fmt: skip


# ---- end to end: real servers, one killed mid-run ------------------------------------------


def _serve(tmp: Path, name: str) -> tuple[subprocess.Popen[bytes], str]:
    assert TUNELOOP, "the tuneloop script is installed with the package"
    port_file = tmp / f"{name}.port"
    argv = [TUNELOOP, "serve", str(MODEL), "--port", "0", "--port-file", str(port_file)]
    argv += ["--served-model-name", "arith", "--threads", "1"]
    log = open(tmp / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(argv, stdout=log, stderr=log), str(port_file)


def _wait_healthy(proc: subprocess.Popen[bytes], port_file: str) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"server exited: {Path(port_file).with_suffix('.log')}"
        port = Path(port_file).read_text().strip() if Path(port_file).exists() else ""
        if port:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    return f"http://127.0.0.1:{port}"
            except httpx.HTTPError:
                pass
        time.sleep(0.2)
    raise AssertionError("server did not become healthy in 60 s")


@pytest.fixture
def two_servers(tmp_path: Path) -> Iterator[list[tuple[subprocess.Popen[bytes], str]]]:
    started = [_serve(tmp_path, "a"), _serve(tmp_path, "b")]
    try:
        yield [(proc, _wait_healthy(proc, pf)) for proc, pf in started]
    finally:
        for proc, _ in started:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=30)


def _eval(urls: list[str], out: Path) -> subprocess.CompletedProcess[str]:
    argv = [TUNELOOP, "eval", "--model", "arith", "--suite", str(SUITE), "--out", str(out)]
    argv += [a for url in urls for a in ("--endpoint", url)]
    argv += ["--max-tokens", "12", "--concurrency", "8", "--backoff-s", "0.1", "--no-progress"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def _kill_when(rows_file: Path, at_rows: int, proc: subprocess.Popen[bytes]) -> threading.Thread:
    def watch() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if rows_file.exists() and rows_file.read_bytes().count(b"\n") >= at_rows:
                os.kill(proc.pid, signal.SIGKILL)
                return
            time.sleep(0.01)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_eval_over_two_real_servers_survives_one_killed_mid_run(
    two_servers: list[tuple[subprocess.Popen[bytes], str]], tmp_path: Path
) -> None:
    (_, url_a), (proc_b, url_b) = two_servers
    single = _eval([url_a], tmp_path / "single")
    assert single.returncode == 0, single.stderr
    watcher = _kill_when(tmp_path / "spread" / "samples.jsonl", 100, proc_b)
    spread = _eval([url_a, url_b], tmp_path / "spread")
    watcher.join()
    assert spread.returncode == 0, spread.stderr
    assert proc_b.wait(timeout=5) == -signal.SIGKILL  # really killed, and during the run
    rows = _rows(tmp_path / "spread")
    assert rows == _rows(tmp_path / "single")  # greedy: identical whichever replica served
    assert len(rows) == 320 and {r["status"] for r in rows.values()} == {"ok"}
    summary = read_record(tmp_path / "spread" / "summary.json", EvalSummary)
    a, b = summary.replicas
    assert b.served > 0 and b.failed > 0  # b answered before the kill, failed after it
    assert a.served + b.served == 320 and summary.counts["missing"] == 0
