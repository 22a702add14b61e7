"""The sandbox contains hostile code: network, escapes, loops, fork bombs, memory, output,
secrets. Each case runs with short limits; every case must also leave the host unharmed."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest

from tuneloop.registry import scorers
from tuneloop.scorers.sandbox import Limits, isolation, run_python

FAST = Limits(wall_s=4, cpu_s=1, memory_mb=256, file_mb=1, output_bytes=4096, nproc=16)
KERNEL = pytest.mark.parametrize("kernel", [True, False], ids=["kernel+audit", "audit-only"])


@pytest.fixture
def listener():
    """A loopback TCP server that records whether anything connected."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    srv.settimeout(0.2)
    hits: list[int] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            hits.append(1)
            conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield srv.getsockname()[1], hits
    stop.set()
    thread.join()
    srv.close()


@KERNEL
def test_network_is_blocked(listener, kernel: bool) -> None:
    port, hits = listener
    code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)"
    result = run_python(code, FAST, kernel=kernel)
    assert result.returncode != 0 and hits == []


def test_network_namespace_alone_blocks_loopback(listener) -> None:
    """Even with the audit hook stepped around (via _socket), the namespace has no route."""
    if "netns" not in isolation()[1]:
        pytest.skip("no network namespace here (not root and no user namespaces)")
    port, hits = listener
    code = (
        "import _socket\ns = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)\n"
        f"s.settimeout(1)\ns.connect(('127.0.0.1', {port}))"
    )
    result = run_python(code, FAST)
    assert result.returncode != 0 and hits == []


@KERNEL
def test_cannot_write_outside_its_folder(tmp_path: Path, kernel: bool) -> None:
    target = tmp_path / "escaped.txt"
    code = f"open({str(target)!r}, 'w').write('x')\n"
    result = run_python(code, FAST, kernel=kernel)
    assert result.returncode != 0 and not target.exists()
    inside = run_python("open('ok.txt', 'w').write('x')\nprint(open('ok.txt').read())", FAST)
    assert inside.returncode == 0 and inside.stdout == "x\n"


@KERNEL
def test_infinite_loop_is_stopped(kernel: bool) -> None:
    result = run_python("while True:\n    pass", FAST, kernel=kernel)
    assert result.reason in ("cpu_limit", "timeout", "killed")


def test_sleeping_code_hits_the_wall_clock() -> None:
    result = run_python("import time\ntime.sleep(60)", Limits(wall_s=1))
    assert result.reason == "timeout"


@KERNEL
def test_fork_bomb_is_contained(kernel: bool) -> None:
    code = (
        "import os, time\n"
        "for _ in range(10_000):\n"
        "    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.01)\n"
        "time.sleep(60)\n"
    )
    result = run_python(code, Limits(wall_s=2, cpu_s=1, nproc=16), kernel=kernel)
    assert result.returncode is None or result.returncode != 0
    # nothing of it survives the group kill
    assert _processes_running(result_marker="main.py") == 0


def _processes_running(result_marker: str) -> int:
    count = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if b"tuneloop-sandbox-" in cmd and result_marker.encode() in cmd and state != "Z":
            count += 1
    return count


@KERNEL
def test_huge_allocation_fails(kernel: bool) -> None:
    result = run_python("x = bytearray(8 * 1024**3)", FAST, kernel=kernel)
    assert result.reason == "memory_limit"


@KERNEL
def test_output_is_capped(kernel: bool) -> None:
    code = "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)"
    result = run_python(code, FAST, kernel=kernel)
    assert result.reason == "output_limit" and len(result.stdout) <= FAST.output_bytes


@KERNEL
def test_environment_has_no_secrets(monkeypatch, kernel: bool) -> None:
    monkeypatch.setenv("TUNELOOP_TEST_SECRET", "hunter2")
    result = run_python("import os\nprint(sorted(os.environ))", FAST, kernel=kernel)
    assert result.returncode == 0 and "TUNELOOP_TEST_SECRET" not in result.stdout
    assert "HOME" in result.stdout


@KERNEL
def test_cannot_start_programs(kernel: bool) -> None:
    result = run_python("import subprocess\nsubprocess.run(['true'])", FAST, kernel=kernel)
    assert result.returncode != 0 and "starting programs is disabled" in result.stderr


HOSTILE = {
    "network": "import socket\nsocket.create_connection(('127.0.0.1', 9), timeout=1)",
    "escape": "open('/tmp/tuneloop-escape-test', 'w').write('x')",
    "loop": "while True:\n    pass",
    "fork_bomb": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n"
    "        pass",
    "memory": "x = bytearray(8 * 1024**3)",
    "flood": "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)",
    "secrets": "import os\nassert os.environ.get('TUNELOOP_TEST_SECRET') == 'hunter2'",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_scorer_scores_hostile_completions_zero_with_reason(monkeypatch, name: str) -> None:
    monkeypatch.setenv("TUNELOOP_TEST_SECRET", "hunter2")
    score = scorers.get("python_tests")(wall_s=2, cpu_s=1, memory_mb=256)
    completion = f"```python\n{HOSTILE[name]}\n```"
    result = score({"tests": "assert True", "scorer_args": {"file_mb": 1}}, completion)
    assert result.value == 0.0 and result.detail["reason"]
    assert not Path("/tmp/tuneloop-escape-test").exists()
    assert _processes_running(result_marker="main.py") == 0
