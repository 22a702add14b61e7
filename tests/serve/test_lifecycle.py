"""Process lifecycle: startup failures raise with the log tail, teardown leaves nothing behind."""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tuneloop.config import ServeConfig, ServerConfig
from tuneloop.errors import InputError, PhaseFailed
from tuneloop.serve.embedded import ServerSettings, run_server
from tuneloop.serve.lifecycle import (
    EXIT_BIND,
    Launch,
    free_port,
    launched,
    log_tail,
    spawn,
    terminate_group,
)
from tuneloop.serving import serving


def gone(pid: int, within_s: float = 10.0) -> bool:
    """True once `pid` no longer runs (a zombie awaiting its reaper counts as gone)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def fake(tmp_path: Path, code: str, timeout_s: float = 30.0) -> Launch:
    return Launch(
        argv=[sys.executable, "-c", textwrap.dedent(code)],
        served_model="m",
        host="127.0.0.1",
        port=None,
        port_file=tmp_path / "port",
        startup_timeout_s=timeout_s,
        log_path=tmp_path / "server.log",
    )


def test_a_server_that_dies_during_startup_raises_with_its_log(tmp_path: Path) -> None:
    launch = fake(tmp_path, "import sys; print('weights are corrupt'); sys.exit(1)")
    with pytest.raises(PhaseFailed, match="status 1") as info, launched(launch):
        pass
    assert "weights are corrupt" in str(info.value)


def test_a_bind_failure_is_an_input_error(tmp_path: Path) -> None:
    launch = fake(tmp_path, f"import sys; print('in use'); sys.exit({EXIT_BIND})")
    with pytest.raises(InputError, match="serve.port") as info, launched(launch):
        pass
    assert "in use" in str(info.value)


def test_a_server_that_never_gets_ready_times_out_and_is_killed(tmp_path: Path) -> None:
    launch = fake(tmp_path, "import os, time; print(os.getpid(), flush=True); time.sleep(60)", 2)
    with pytest.raises(PhaseFailed, match="not ready within 2 s"), launched(launch):
        pass
    pid = int((tmp_path / "server.log").read_text().split()[0])
    assert gone(pid)


def test_teardown_kills_the_whole_group_even_children_ignoring_sigterm(tmp_path: Path) -> None:
    child = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    code = f"""
        import subprocess, sys, time
        p = subprocess.Popen([sys.executable, "-c", {child!r}])
        print(p.pid, flush=True)
        time.sleep(60)
    """
    launch = fake(tmp_path, code)
    proc = spawn(launch)
    log = tmp_path / "server.log"
    deadline = time.monotonic() + 20
    while not log.read_text().strip() and time.monotonic() < deadline:
        time.sleep(0.05)
    grandchild = int(log.read_text().split()[0])
    terminate_group(proc, grace_s=1.0)
    assert proc.returncode is not None
    assert gone(grandchild, within_s=5)


def test_a_busy_port_fails_fast_before_spawning(tiny_model: Path, busy_port: int) -> None:
    in_use = f"127.0.0.1:{busy_port} is already in use"
    with pytest.raises(InputError, match=in_use), serving(tiny_model, ServeConfig(port=busy_port)):
        pass


def test_the_server_reports_a_busy_port_before_loading(busy_port: int) -> None:
    settings = ServerSettings(config=ServerConfig(port=busy_port))
    assert run_server("/does/not/matter", settings) == EXIT_BIND


def test_a_model_that_fails_to_load_gives_a_clear_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text('{"model_type": "qwen2", truncated')
    log = tmp_path / "log"
    with pytest.raises(PhaseFailed, match="status 4") as info, serving(broken, log_path=log):
        pass
    assert "failed to load" in str(info.value)


def test_no_server_survives_a_sigkilled_parent(tiny_model: Path, tmp_path: Path) -> None:
    code = f"""
        import time
        from tuneloop.serving import serving
        with serving({str(tiny_model)!r}, log_path={str(tmp_path / "log")!r}) as ep:
            print(ep.pid, flush=True)
            time.sleep(300)
    """
    parent = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE, text=True
    )
    try:
        ready, _, _ = select.select([parent.stdout], [], [], 180)
        assert ready, "the parent never reported a server pid"
        assert parent.stdout is not None
        server = int(parent.stdout.readline())
        assert not gone(server, within_s=0.2)
    finally:
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
    assert gone(server, within_s=5)


def test_the_log_tail_cuts_a_huge_line_and_keeps_the_last_lines(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("\n".join(["early"] * 30 + ["x" * 1000, "last"]) + "\n")
    tail = log_tail(log, lines=3, width=10).splitlines()
    assert tail == ["  | early", "  | xxxxxxxxxx … (990 more characters)", "  | last"]
    assert log_tail(tmp_path / "none.log") == "(no server log)"


def test_a_server_that_dies_while_in_use_fails_the_block_that_used_it(tmp_path: Path) -> None:
    from .fake_vllm_env import FAKE_API_SERVER

    port = free_port("127.0.0.1")
    launch = Launch(
        argv=[sys.executable, str(FAKE_API_SERVER), "--model", "m", "--port", str(port)],
        served_model="m",
        host="127.0.0.1",
        port=port,
        startup_timeout_s=30,
        log_path=tmp_path / "server.log",
    )
    died = pytest.raises(PhaseFailed, match="exited with status -9 while it was in use")
    with died, launched(launch) as (_, pid):
        os.kill(pid, signal.SIGKILL)
        assert gone(pid)
