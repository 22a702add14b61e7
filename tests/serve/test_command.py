"""`tuneloop serve` and `tuneloop proxy` (`serve/command.py`): bad input, and the proxy as a
person runs it (the installed script, a real upstream, SIGTERM)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import typer
from typer.testing import CliRunner

from tuneloop.errors import InputError
from tuneloop.serve.command import serve

from .upstreams import fake_upstream, running


def app() -> typer.Typer:
    app = typer.Typer()
    app.command()(serve)
    return app


def test_the_command_module_imports_nothing_heavy() -> None:
    code = (
        "import sys, tuneloop.serve, tuneloop.serve.command; "
        "heavy = {'torch', 'transformers', 'fastapi', 'uvicorn', 'httpx', 'aiohttp'}; "
        "heavy &= set(sys.modules); "
        "sys.exit(sorted(heavy) or 0)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_serve_refuses_a_folder_without_a_model(tmp_path: Path) -> None:
    result = CliRunner().invoke(app(), [str(tmp_path)])
    assert isinstance(result.exception, InputError)
    assert "config.json" in str(result.exception)


def test_serve_refuses_an_unset_key_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "config.json").write_text("{}")
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    result = CliRunner().invoke(app(), [str(tmp_path), "--api-key-env", "NO_SUCH_KEY_VAR"])
    assert isinstance(result.exception, InputError)
    assert "NO_SUCH_KEY_VAR" in str(result.exception)


def test_python_m_app_exits_2_on_bad_input(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tuneloop.serve.app", str(tmp_path)], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "config.json" in proc.stderr


# ---- tuneloop proxy ----------------------------------------------------------------------


def script() -> str:
    beside = Path(sys.executable).parent / "tuneloop"
    found = str(beside) if beside.is_file() else shutil.which("tuneloop")
    if found is None:
        pytest.fail("the tuneloop console script is not installed")
    return found


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--upstream", "ftp://x"], "--upstream"),
        (["--upstream", "http://127.0.0.1:1", "--log-dir", "{file}/sub"], "--log-dir"),
        (["--upstream", "http://127.0.0.1:1", "--api-key-env", "NO_SUCH_VAR_X"], "NO_SUCH_VAR_X"),
    ],
)
def test_bad_options_exit_2_with_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "file").write_text("x")
    args = [a.replace("{file}", str(tmp_path / "file")) for a in args]
    done = subprocess.run([script(), "proxy", *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr


def test_a_log_folder_in_use_is_refused(tmp_path: Path) -> None:
    from tuneloop.serve.traffic import TrafficLog

    log = TrafficLog(tmp_path)
    try:
        args = ["proxy", "--upstream", "http://127.0.0.1:1", "--log-dir", str(tmp_path)]
        done = subprocess.run([script(), *args], capture_output=True, text=True, timeout=60)
    finally:
        log.close()
    assert done.returncode == 2 and "another process" in done.stderr


def test_the_proxy_serves_logs_and_stops_on_sigterm(tmp_path: Path) -> None:
    port_file = tmp_path / "port"
    with running(fake_upstream("up")) as upstream:
        args = ["--upstream", f"{upstream}/v1", "--port", "0", "--log-dir", str(tmp_path / "t")]
        proc = subprocess.Popen(
            [script(), "proxy", *args, "--port-file", str(port_file)],
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 30
            while not port_file.exists() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            base = f"http://127.0.0.1:{port_file.read_text().strip()}"
            body = {"model": "up", "messages": [{"role": "user", "content": "hi"}]}
            for _ in range(100):  # the port is written just before uvicorn starts serving
                try:
                    reply = httpx.post(f"{base}/v1/chat/completions", json=body)
                    break
                except httpx.ConnectError:
                    time.sleep(0.05)
            assert reply.json()["choices"][0]["message"]["content"] == "up: hi"
        finally:
            proc.send_signal(signal.SIGTERM)
            _, stderr = proc.communicate(timeout=30)
    # uvicorn shuts down gracefully, then re-raises SIGTERM: the shell sees 143
    assert proc.returncode == -signal.SIGTERM, stderr
    assert "Traceback" not in stderr
    (line,) = (tmp_path / "t" / "traffic.jsonl").read_text().splitlines()
    assert json.loads(line)["response"]["model"] == "up"
