"""Run the installed `tuneloop` console script as a user does, for the regression tests.

Each defect a new user hit is pinned by a test that calls the real entry point in a subprocess
(`tests/test_cli_installed.py` says why `CliRunner` is not enough). Import it from a test module
with a relative import (`from ..installed import tuneloop`); pytest runs with
`--import-mode=importlib`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest


def script() -> str:
    """The console script beside this interpreter (the venv's), else the one on PATH."""
    beside = Path(sys.executable).parent / "tuneloop"
    found = str(beside) if beside.is_file() else shutil.which("tuneloop")
    if found is None:
        pytest.fail("the tuneloop console script is not installed (run scripts/setup)")
    return found


@dataclass(frozen=True)
class Ran:
    """One finished call of the script."""

    args: tuple[str, ...]
    code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def assert_input_error(self, *needles: str) -> None:
        """Exit 2, no traceback, and the message names each needle (a file, key or id)."""
        assert self.code == 2, f"exit {self.code} for {self.args}:\n{self.output}"
        assert "Traceback" not in self.output, self.output
        for needle in needles:
            assert needle in self.output, f"{needle!r} not in:\n{self.output}"


def tuneloop(
    *args: str | Path,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 300,
    stdin: str | None = None,
) -> Ran:
    """Run `tuneloop ARGS…` and return what it printed; `env` is added to this process's."""
    full_env = {**os.environ, **(env or {})}
    argv = tuple(str(a) for a in args)
    done = subprocess.run(
        [script(), *argv],
        cwd=cwd,
        env=full_env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return Ran(argv, done.returncode, done.stdout, done.stderr)


@contextmanager
def proxy_process(
    tmp_path: Path, *args: str | Path, env: Mapping[str, str] | None = None
) -> Iterator[str]:
    """`tuneloop proxy ARGS --port 0` as a user starts it; yields its base URL once it serves,
    and on leaving stops it with SIGTERM and asserts it printed no traceback."""
    port_file = tmp_path / "proxy.port"
    argv = [script(), "proxy", *map(str, args), "--port", "0", "--port-file", str(port_file)]
    proc = subprocess.Popen(
        argv, stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})}
    )
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        base = f"http://127.0.0.1:{port_file.read_text().strip()}"
        for _ in range(100):  # the port is written just before uvicorn starts serving
            try:
                httpx.get(f"{base}/health", timeout=5)
                break
            except httpx.ConnectError:
                time.sleep(0.05)
        yield base
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
        assert "Traceback" not in stderr, stderr


def traffic_status(tmp_path: Path) -> dict:
    """`tuneloop status --json`'s traffic part (and `stderr`) for a one-item suite reading
    the traffic folder `tmp_path/traffic`; asserts exit 0."""
    (tmp_path / "suite.jsonl").write_text(
        json.dumps({"id": "q1", "messages": [{"role": "user", "content": "x"}], "answer": "4"})
        + "\n"
    )
    (tmp_path / "loop.yaml").write_text(
        "base_model: model\nworkdir: runs/loop\nsuite: {path: suite.jsonl}\n"
        "flywheel: {traffic: [traffic]}\n"
    )
    ran = tuneloop("status", "loop.yaml", "--json", cwd=tmp_path)
    assert ran.code == 0, ran.output
    return {**json.loads(ran.stdout)["traffic"], "stderr": ran.stderr}
