"""`tuneloop watch` as a person runs it — the installed script in a subprocess — against the
fake round command: kill -9 mid-round, SIGTERM/SIGINT, a second watcher, spend approval.

The fake round (`fake_round.py`) appends what it does to an events file, so each test counts
how many times a round started, was told to stop, and ran to completion.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .watch_world import World, make_world

TUNELOOP = str(Path(sys.executable).parent / "tuneloop")


def wait_for(predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError("timed out waiting")
        time.sleep(0.05)


class Procs:
    """Watchers started by a test; whatever is left (and any fake round) is killed after it."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[str]] = []
        self.worlds: list[World] = []

    def watch(self, world: World, *args: str) -> subprocess.Popen[str]:
        self.worlds.append(world)
        argv = [TUNELOOP, "watch", str(world.config), "--round-command", world.round_command()]
        proc = subprocess.Popen(
            [*argv, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.started.append(proc)
        return proc

    def cleanup(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
        for world in self.worlds:
            for event in world.events():
                if event.startswith("start "):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(event.split()[2]), signal.SIGKILL)


@pytest.fixture
def procs() -> Iterator[Procs]:
    p = Procs()
    try:
        yield p
    finally:
        p.cleanup()


def tuneloop(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TUNELOOP, *args], capture_output=True, text=True, timeout=60)


def test_kill_9_mid_round_then_restart_completes_the_round_once(
    tmp_path: Path, procs: Procs
) -> None:
    world = make_world(tmp_path)
    world.set_plan(sleep=60)
    world.add_labels(2)
    first = procs.watch(world)
    wait_for(lambda: world.count("start", "r0001") == 1)
    first.kill()  # SIGKILL: no handler runs
    first.communicate()
    # the round is told to checkpoint when its watcher dies (PR_SET_PDEATHSIG on Linux)
    if sys.platform.startswith("linux"):
        wait_for(lambda: world.count("term", "r0001") == 1)
    world.set_plan(sleep=0.2)
    second = procs.watch(world, "--max-rounds", "1")
    _, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    assert world.count("done", "r0001") == 1
    assert not [e for e in world.events() if "r0002" in e]
    assert "round r0001 resumed (attempt 2)" in err
    state = world.state()
    row = state.round("r0001")
    assert row is not None and (row.status, row.exit_code, row.attempts) == ("finished", 0, 2)
    assert [r.round_id for r in state.rounds()] == ["r0001"]


def test_a_round_left_running_by_a_dead_watcher_is_waited_for_not_doubled(
    tmp_path: Path, procs: Procs
) -> None:
    world = make_world(tmp_path)
    # survives its watcher's death, and runs until the second watcher says it waits for it
    # (a fixed sleep raced the second watcher's start on a loaded 2-core machine)
    release = tmp_path / "release"
    world.set_plan(sleep=120, until=str(release), ignore_term=True)
    world.add_labels(2)
    first = procs.watch(world)
    wait_for(lambda: world.count("start", "r0001") == 1)
    first.kill()
    first.communicate()
    second = procs.watch(world, "--max-rounds", "1")
    said: list[str] = []
    assert second.stderr is not None
    reader = threading.Thread(target=lambda: said.extend(second.stderr), daemon=True)
    reader.start()
    waiting = "from an earlier watcher still runs; waiting for it to end"
    wait_for(lambda: any(waiting in line for line in said), timeout=60)
    release.touch()
    second.wait(timeout=60)
    reader.join(10)
    err = "".join(said)
    assert second.returncode == 0, err
    # one process did the work; the resume found it finished and reported its status
    assert world.count("start", "r0001") == 1 and world.count("done", "r0001") == 1
    assert world.count("again", "r0001") == 1
    row = world.state().round("r0001")
    assert row is not None and (row.status, row.exit_code) == ("finished", 0)


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_the_round_resumably_and_the_watcher_cleanly(
    tmp_path: Path, procs: Procs, signum: int, code: int
) -> None:
    world = make_world(tmp_path)
    world.set_plan(sleep=60)
    world.add_labels(2)
    watcher = procs.watch(world)
    wait_for(lambda: world.count("start", "r0001") == 1)
    watcher.send_signal(signum)
    _, err = watcher.communicate(timeout=20)
    assert watcher.returncode == 0, err
    assert world.count("term", "r0001") == 1  # forwarded
    assert f"stop: {signal.Signals(signum).name} received" in err
    row = world.state().round("r0001")
    assert row is not None and (row.status, row.exit_code) == ("interrupted", code)
    world.set_plan(sleep=0.1)
    again = procs.watch(world, "--max-rounds", "1")
    _, err = again.communicate(timeout=60)
    assert again.returncode == 0, err
    assert world.count("start", "r0001") == 2 and world.count("done", "r0001") == 1
    assert not [e for e in world.events() if "r0002" in e]


def test_a_second_watcher_is_refused_naming_the_holder(tmp_path: Path, procs: Procs) -> None:
    world = make_world(tmp_path)
    first = procs.watch(world)
    lock = tmp_path / "ledger" / "loop.db.watch.lock"
    wait_for(lambda: lock.is_file() and str(first.pid) in lock.read_text(encoding="utf-8"))
    second = tuneloop(
        "watch", str(world.config), "--once", "--round-command", world.round_command()
    )
    assert second.returncode == 2
    assert "another watcher holds this ledger" in second.stderr
    assert f"pid {first.pid} on host" in second.stderr
    assert "Traceback" not in second.stderr
    first.kill()
    first.communicate()
    third = tuneloop("watch", str(world.config), "--once", "--round-command", world.round_command())
    assert third.returncode == 0, third.stderr
    assert f"took over {lock} from a watcher that is gone (pid {first.pid} on host" in (
        third.stderr
    )
    # a clean exit leaves nothing to take over
    fourth = tuneloop(
        "watch", str(world.config), "--once", "--round-command", world.round_command()
    )
    assert fourth.returncode == 0 and "took over" not in fourth.stderr


def test_spend_approval_through_the_cli(tmp_path: Path) -> None:
    world = make_world(tmp_path, approval={"spend": True})
    world.add_labels(2)
    cmd = ("watch", str(world.config), "--round-command", world.round_command(), "--once")
    held = tuneloop(*cmd)
    assert held.returncode == 0, held.stderr
    assert "round r0001 (new_labels) awaits approval of its spend" in held.stderr
    assert world.events() == []
    assert "r0001  awaiting_approval" in tuneloop("status", str(world.config)).stdout
    assert tuneloop(*cmd).returncode == 0 and world.events() == []  # still waiting
    approved = tuneloop("approve", "r0001", "--config", str(world.config))
    assert approved.returncode == 0, approved.stderr
    assert "approved round r0001" in approved.stdout
    ran = tuneloop(*cmd)
    assert ran.returncode == 0, ran.stderr
    assert world.count("done", "r0001") == 1
    twice = tuneloop("approve", "r0001", "--config", str(world.config))
    assert twice.returncode == 2 and "not awaiting approval" in twice.stderr


def test_bad_input_exits_2_with_the_key(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    (tmp_path / "logs" / "traffic.jsonl").unlink()
    (tmp_path / "logs").rmdir()
    missing = tuneloop(
        "watch", str(world.config), "--once", "--round-command", world.round_command()
    )
    assert missing.returncode == 2
    assert "flywheel.traffic:" in missing.stderr and "does not exist" in missing.stderr
    (tmp_path / "other").mkdir()
    world = make_world(tmp_path / "other")
    bad = tuneloop("watch", str(world.config), "--once", "--round-command", "true")
    assert bad.returncode == 2 and "--round-command: 'true' has no {round}" in bad.stderr
    world.logs.joinpath("traffic.jsonl").write_text("{not json\n", encoding="utf-8")
    broken = tuneloop(
        "watch", str(world.config), "--once", "--round-command", world.round_command()
    )
    # a bad traffic line is skipped and named, never a stall (issue 25 items 2-3)
    assert broken.returncode == 0 and "traffic.jsonl:1: not a JSON line" in broken.stderr


def test_a_resumed_rounds_end_is_told_by_its_final_attempt(tmp_path: Path) -> None:
    """Issue 25 item 14: the round log is appended over attempts; the interrupted attempt's
    `error: received signal 15` is not why the resumed attempt's round ended."""
    world = make_world(tmp_path)
    world.add_labels(2)
    world.set_plan(exit=143, say="error: received signal 15")
    once = ("watch", str(world.config), "--once", "--round-command", world.round_command())
    first = tuneloop(*once)
    assert first.returncode == 0, first.stderr
    assert "r0001 interrupted" in first.stderr
    world.set_plan(exit=1, say="verdict: reject")
    second = tuneloop(*once)
    assert second.returncode == 0, second.stderr
    ended = [line for line in second.stderr.splitlines() if " finished: round r0001 " in line]
    assert ended and "verdict: reject" in ended[0], second.stderr
    assert "signal 15" not in ended[0]
    shown = tuneloop("status", str(world.config))
    assert shown.returncode == 0, shown.stderr
    rows = [line for line in shown.stdout.splitlines() if "r0001  finished" in line]
    assert rows and "signal 15" not in rows[0], shown.stdout


def test_approving_a_round_that_does_not_exist_names_the_watchers_state(tmp_path: Path) -> None:
    """`approve r0099 --config` fell through to the promotion path and advised `tuneloop
    gate` creates the ledger; a round id is a watcher round's, and the error says so."""
    world = make_world(tmp_path)
    ran = tuneloop("approve", "r0099", "--config", str(world.config))
    assert ran.returncode == 2 and "Traceback" not in ran.stderr
    assert "no watcher round r0099" in ran.stderr and "flywheel.db" in ran.stderr
    assert "tuneloop gate" not in ran.stderr
    assert not (tmp_path / "ledger").exists() and not world.workdir.exists()


def test_the_default_round_command_needs_a_rolling_split(tmp_path: Path) -> None:
    """`watch` on a config without suite.rolling ran happily, and every round it started
    would have been refused; it is refused at start, before anything is created."""
    world = make_world(tmp_path)
    ran = tuneloop("watch", str(world.config), "--once")
    assert ran.returncode == 2 and "Traceback" not in ran.stderr
    assert "suite.rolling: rounds need a rolling split" in ran.stderr
    assert not world.workdir.exists()
