"""`tuneloop view` as a person runs it: the installed script in a subprocess.

Bad input exits 2 with one `error:` line naming the file or option, no traceback, and writes
nothing; a busy port exits 3 (as `tuneloop serve` and `proxy`); a good bundle exits 0. The
calls run in a thread pool, once per module (each is a fresh interpreter).
"""

from __future__ import annotations

import re
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tuneloop.config import load_config
from tuneloop.loop.layout import ledger_path

TUNELOOP = str(Path(sys.executable).with_name("tuneloop"))

# case: (expected exit status, what its one line must say)
EXPECTED = {
    "no ledger at --ledger": (2, "no ledger here (--ledger)"),
    "a text file as --ledger": (2, "not a readable tuneloop ledger"),
    "no such loop.yaml": (2, "config file not found"),
    "neither config nor ledger": (2, "name the loop"),
    "neither --serve nor --bundle": (2, "choose one of --serve"),
    "a non-loopback host": (2, "--host 0.0.0.0: not a loopback address"),
    "a bundle over other files": (2, "holds other files"),
    "a bundle below a file": (2, "is a file, not a folder"),
    "a busy port": (3, "cannot bind 127.0.0.1:"),
    "a good bundle": (0, "4 rounds, 3 champion versions, 9 log entries, 3 run reports"),
}


def _cases(world: Path, tmp: Path, busy: int) -> dict[str, list[str]]:
    ledger = str(ledger_path(load_config(world)))
    junk = tmp / "junk.db"
    junk.write_text("plain text, not SQLite\n" * 50)
    foreign = tmp / "foreign"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    w, out = str(world), str(tmp / "out")
    return {
        "no ledger at --ledger": ["--ledger", str(tmp / "nope.db"), "--bundle", out],
        "a text file as --ledger": ["--ledger", str(junk), "--bundle", out],
        "no such loop.yaml": [str(tmp / "missing.yaml"), "--bundle", out],
        "neither config nor ledger": ["--bundle", out],
        "neither --serve nor --bundle": [w],
        "a non-loopback host": [w, "--serve", "--host", "0.0.0.0"],
        "a bundle over other files": [w, "--bundle", str(foreign)],
        "a bundle below a file": ["--ledger", ledger, "--bundle", str(junk / "site")],
        "a busy port": [w, "--serve", "--port", str(busy)],
        "a good bundle": [w, "--bundle", str(tmp / "good")],
    }


@pytest.fixture(scope="module")
def runs(world: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    tmp = tmp_path_factory.mktemp("view_cli")
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        cases = _cases(world, tmp, holder.getsockname()[1])

        def call(args: list[str]) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [TUNELOOP, "view", *args], capture_output=True, text=True, timeout=120
            )

        with ThreadPoolExecutor(4) as pool:
            done = dict(zip(cases, pool.map(call, cases.values()), strict=True))
    yield {"done": done, "tmp": tmp}


@pytest.mark.parametrize("case", list(EXPECTED))
def test_exit_status_and_message(runs: dict[str, object], case: str) -> None:
    done = runs["done"][case]  # type: ignore[index]
    status, words = EXPECTED[case]
    output = done.stdout + done.stderr
    assert done.returncode == status, output
    assert words in output, output
    assert "Traceback" not in output
    if status == 2:
        errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, done.stderr


def test_refusals_write_nothing(runs: dict[str, object]) -> None:
    tmp: Path = runs["tmp"]  # type: ignore[assignment]
    assert not (tmp / "out").exists()
    assert [p.name for p in (tmp / "foreign").iterdir()] == ["keep.txt"]
    assert (tmp / "good" / "index.html").is_file()
    assert sorted(p.name for p in tmp.iterdir()) == ["foreign", "good", "junk.db"]


@contextmanager
def serving_view(*args: str) -> Iterator[str]:
    """`tuneloop view ARGS --serve --port 0` as a user starts it; yields its base URL."""
    proc = subprocess.Popen(
        [TUNELOOP, "view", *args, "--serve", "--port", "0"], stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r"(http://127\.0\.0\.1:\d+)/", line)
        assert found, line
        yield found.group(1)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=30)
        assert "Traceback" not in rest, rest


def test_the_served_dashboard_refuses_a_rebound_host_and_never_makes_a_ledger(
    world: Path, tmp_path: Path
) -> None:
    """Issue 25 defects 1 (the dashboard did not check Host: DNS rebinding) and 12 (a ledger
    deleted while `view --serve` ran was re-created empty at the next page)."""
    ledger = tmp_path / "ledger.db"
    shutil.copyfile(ledger_path(load_config(world)), ledger)
    with serving_view("--ledger", str(ledger)) as base:
        page = httpx.get(f"{base}/")
        assert page.status_code == 200 and page.headers["x-frame-options"] == "DENY"
        rebound = httpx.get(f"{base}/", headers={"host": "evil.example:8150"})
        assert rebound.status_code == 403 and "<table" not in rebound.text
        ledger.unlink()
        for leftover in tmp_path.glob("ledger.db-*"):  # SQLite's WAL files go with it
            leftover.unlink()
        gone = httpx.get(f"{base}/")
        assert gone.status_code == 503 and f"{ledger}: no ledger here" in gone.text
        assert not ledger.exists()
