"""The sandbox contains hostile code: network, escapes, loops, fork bombs, memory, output,
secrets. Each case runs with short limits; every case must also leave the host unharmed."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tuneloop.registry import scorers
from tuneloop.scorers.sandbox import Limits, execute, isolation, run_python
from tuneloop.scorers.sandbox.kinds import KINDS

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


# --- isolation between runs and from the host ------------------------------------------------

DETACH = {
    "setsid": "",
    "double_fork": "    if os.fork():\n        os._exit(0)\n",
}


def _namespaces_allowed() -> bool:
    """Whether this machine lets us make PID and mount namespaces (a property of the host,
    not of the sandbox code under test)."""
    unshare = shutil.which("unshare")
    flags = ["--pid", "--fork", "--mount"]
    return unshare is not None and any(
        subprocess.run([unshare, *extra, *flags, "true"], capture_output=True).returncode == 0
        for extra in ([], ["--map-root-user"])
    )


NAMESPACES = pytest.mark.skipif(not _namespaces_allowed(), reason="namespaces not permitted")


def _runner(kind: str):
    """run_python itself ("default"), or one run under a named kind of isolation."""
    if kind == "default":
        return run_python
    iso = KINDS[kind]
    if execute._execute("pass", FAST, iso).reason is not None:
        pytest.skip(f"isolation kind {kind!r} does not work here")
    return lambda source, limits: execute._execute(source, limits, iso)


def _live_with(text: str) -> list[int]:
    """Host pids of non-zombie processes whose command line contains `text`."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text.encode() in cmd and state != "Z":
            pids.append(int(pid))
    return pids


@pytest.mark.parametrize("kind", ["default", "user_namespaces", "own_uid"])
def test_kill_all_in_one_run_spares_a_concurrent_run(kind: str) -> None:
    if not {"pidns", "own_uid", "nobody"} & set(isolation()[1]):
        # the code would run as our own uid: kill(-1) would hit this test runner
        pytest.skip("sandboxed code runs as the caller here")
    run = _runner(kind)
    results = {}
    victim = threading.Thread(
        target=lambda: results.update(
            victim=run("import time\ntime.sleep(1.5)\nprint('alive')", FAST)
        )
    )
    victim.start()
    time.sleep(0.5)
    attack = run(
        "import os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept ProcessLookupError:\n"
        "    pass  # nothing else it may signal\nprint('sent')",
        FAST,
    )
    victim.join()
    assert attack.stdout == "sent\n"
    assert results["victim"].returncode == 0 and results["victim"].stdout == "alive\n"


@pytest.mark.parametrize("detach", sorted(DETACH))
@pytest.mark.parametrize("kind", ["default", "own_uid"])
def test_detached_children_do_not_outlive_the_run(kind: str, detach: str) -> None:
    code = (
        "import os, time\nr, w = os.pipe()\nif os.fork() == 0:\n    os.setsid()\n"
        + DETACH[detach]
        + "    os.write(w, b'x')\n    time.sleep(30)\n    os._exit(0)\n"
        "os.read(r, 1)\nprint(__file__)\n"
    )
    result = _runner(kind)(code, FAST)
    assert result.returncode == 0, result.stderr
    survivors = _live_with(result.stdout.strip())
    for pid in survivors:  # do not leave them behind when the assertion fails
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    assert survivors == []


@NAMESPACES
@pytest.mark.parametrize("kind", ["default", "user_namespaces"])
def test_host_files_are_not_readable(kind: str) -> None:
    fd, secret = tempfile.mkstemp(prefix="tuneloop-secret-", dir="/tmp")
    try:
        os.write(fd, b"hunter2")
        os.close(fd)
        os.chmod(secret, 0o644)
        code = (
            f"for p in [{secret!r}, '/etc/hostname', '/etc/passwd']:\n"
            "    try:\n        print(p, open(p).read()[:20])\n"
            "    except OSError as e:\n        print(p, type(e).__name__)\n"
            "import json, decimal, random, sqlite3\nprint(random.random() < 1)\n"
        )
        result = _runner(kind)(code, FAST)
    finally:
        os.unlink(secret)
    assert result.returncode == 0, result.stderr
    assert "hunter2" not in result.stdout
    lines = result.stdout.splitlines()
    assert all(line.endswith("FileNotFoundError") for line in lines[:3]), lines
    assert lines[3] == "True"  # the standard library still works inside


@NAMESPACES
def test_jail_work_folder_is_writable_and_the_rest_read_only() -> None:
    code = (
        "import ctypes, os, tempfile\nopen('a.txt', 'w').write('x')\n"
        "tempfile.NamedTemporaryFile(dir=os.environ['TMPDIR']).close()\n"
        # libc directly, past the audit hook: the kernel layer alone must refuse
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print(libc.mkdir(b'/usr/tuneloop-x', 0o755), ctypes.get_errno())\n"
        "print(sorted(os.listdir('/dev')))\n"
    )
    result = run_python(code, FAST)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "-1 30",  # EROFS
        "['full', 'null', 'random', 'urandom', 'zero']",
    ]


def test_degraded_isolation_is_reported(monkeypatch) -> None:
    monkeypatch.setattr(execute, "isolation", lambda: KINDS["none"])
    result = run_python("print(1)", FAST)
    assert result.stdout == "1\n" and result.isolation == ("audit_hook", "rlimits")
    assert result.warning and "degraded to 'none'" in result.warning
    score = scorers.get("python_tests")(wall_s=4)({"tests": "assert True"}, "x = 1")
    assert score.value == 1.0 and "NOT isolated" in score.detail["isolation_warning"]


def test_probe_falls_back_and_says_why(monkeypatch) -> None:
    if os.geteuid() != 0:
        pytest.skip("the own_uid fallback needs root")
    monkeypatch.setattr(execute, "_INIT", Path("/nonexistent/pid1.py"))
    found = execute.isolation.__wrapped__()
    assert found.kind == "own_uid" and "namespaces:" in found.note
    assert "pidns" not in found.layers


@NAMESPACES
def test_full_isolation_has_no_warning() -> None:
    result = run_python("print(1)", FAST)
    assert {"pidns", "mountns", "netns"} <= set(result.isolation) and result.warning is None
