"""The watcher's idle cost: CPU seconds per hour of `tuneloop watch` with nothing to do.

    .venv/bin/python benchmarks/watch_idle.py                      # 30 s, poll every 0.5 s
    .venv/bin/python benchmarks/watch_idle.py --seconds 60 --poll-s 1 --traffic-lines 10000

Goal: idle cost that nobody notices — well under a CPU second per hour at the default
`flywheel.poll_s` (300 s) on a traffic log of typical size.

The watcher is the installed command in its own process, as a person runs it, on a config
whose trigger can never fire (`min_new_labels` is huge) and whose poll backoff is off
(`backoff_factor: 1`), so that every poll is a full look: read the traffic log (`--traffic-
lines` exchanges, half of them with feedback), the ledger, the drift reference, and write one
decision row. Its CPU time (user + system, psutil) is read once its first poll is recorded —
so start-up imports are not counted — and again after `--seconds`; the polls in between are
counted from its decisions table. The peer is a plain `sleep` process measured the same way
over the same span: the floor of "a process that exists and does nothing".

Two arms: no new traffic (the watcher reuses its previous look: a few `stat` calls per poll,
see `flywheel.watch.look`), and traffic flowing at 10 unlabelled exchanges a second (every
poll re-reads the log). Printed for each: CPU seconds per hour at the measured poll
interval, CPU milliseconds per poll, the same scaled to the default poll interval (per-poll
cost × polls per hour; a watcher with backoff polls less), and the ratio against `sleep`.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import yaml

from tuneloop.flywheel.paths import FlywheelPaths

TUNELOOP = str(Path(sys.executable).parent / "tuneloop")
DEFAULT_POLL_S = 300.0


def write_world(root: Path, poll_s: float, traffic_lines: int) -> Path:
    """A config, a suite, a traffic log and a drift reference; returns the config path."""
    items = [
        {"id": f"q{i}", "messages": [{"role": "user", "content": f"{i} + 1"}], "answer": str(i + 1)}
        for i in range(200)
    ]
    (root / "suite.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items), "utf-8")
    (root / "logs").mkdir()
    now = time.time() - 3600
    with (root / "logs" / "traffic.jsonl").open("w", encoding="utf-8") as fh:
        for k in range(traffic_lines):
            request = {"messages": [{"role": "user", "content": f"what is {k} plus {k % 7}?"}]}
            line = {"timestamp": now + k * 0.01, "request": request, "response": {"id": f"c{k}"}}
            fh.write(json.dumps(line) + "\n")
            if k % 2 == 0:
                feedback = {"type": "feedback", "completion_id": f"c{k}", "verdict": "up"}
                fh.write(json.dumps({**feedback, "timestamp": now + k * 0.01 + 1}) + "\n")
    rows = [{"messages": [{"role": "user", "content": f"{i} + 2"}]} for i in range(500)]
    (root / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    config = {
        "base_model": "model",
        "workdir": "runs/loop",
        "suite": {"path": "suite.jsonl"},
        "train": {"data": "train.jsonl"},
        "gate": {"ledger": "ledger/loop.db"},
        "flywheel": {
            "traffic": ["logs"],
            "poll_s": poll_s,
            "triggers": {"min_new_labels": 10**9, "backoff_factor": 1},
        },
    }
    path = root / "loop.yaml"
    path.write_text(yaml.safe_dump(config), "utf-8")
    return path


def polls(db: Path) -> int:
    if not db.exists():
        return 0
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM decisions WHERE kind = 'poll'").fetchone()[0])
    except sqlite3.OperationalError:
        return 0  # the table is being created
    finally:
        conn.close()


def cpu_s(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return float(t.user + t.system)


def append_exchange(log: Path, k: int) -> None:
    """One more unlabelled exchange: new traffic that fires nothing."""
    request = {"messages": [{"role": "user", "content": f"and {k} plus 1?"}]}
    line = {"timestamp": time.time(), "request": request, "response": {"id": f"new{k}"}}
    with log.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(line) + "\n")


def measure_watcher(config: Path, seconds: float, flowing: bool) -> tuple[float, int, float]:
    """(CPU seconds, polls, wall seconds) of the watcher after its first poll; with
    `flowing`, one exchange is appended to the log every 0.1 s meanwhile."""
    db = FlywheelPaths(config.parent / "runs" / "loop").state
    log = config.parent / "logs" / "traffic.jsonl"
    proc = subprocess.Popen(
        [TUNELOOP, "watch", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        end = time.monotonic() + 60
        while polls(db) < 1:
            if proc.poll() is not None or time.monotonic() > end:
                raise SystemExit(f"the watcher did not start (exit {proc.poll()})")
            time.sleep(0.05)
        ps = psutil.Process(proc.pid)
        cpu0, n0, t0 = cpu_s(ps), polls(db), time.monotonic()
        k = 0
        while time.monotonic() - t0 < seconds:
            if flowing:
                append_exchange(log, k)
                k += 1
            time.sleep(0.1)
        cpu1, n1, t1 = cpu_s(ps), polls(db), time.monotonic()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return cpu1 - cpu0, n1 - n0, t1 - t0


def measure_sleep(seconds: float) -> tuple[float, float]:
    proc = subprocess.Popen(["sleep", str(int(seconds) + 60)])
    try:
        time.sleep(0.2)
        ps = psutil.Process(proc.pid)
        cpu0, t0 = cpu_s(ps), time.monotonic()
        time.sleep(seconds)
        cpu1, t1 = cpu_s(ps), time.monotonic()
    finally:
        proc.kill()
        proc.wait()
    return cpu1 - cpu0, t1 - t0


def report(arm: str, cpu: float, n: int, wall: float, poll_s: float) -> float:
    """Print one arm's figures; returns its CPU seconds per hour at this poll interval."""
    per_hour = cpu / wall * 3600
    per_poll = cpu / max(n, 1)
    at_default = per_poll * 3600 / DEFAULT_POLL_S
    print(f"{arm}: {n} polls in {wall:.1f} s (poll_s {poll_s:g}, no backoff)")
    print(f"  CPU {cpu:.2f} s → {per_hour:.1f} CPU s/hour at this poll interval")
    print(
        f"  {per_poll * 1000:.1f} CPU ms per poll → {at_default:.2f} CPU s/hour at the "
        f"default poll_s {DEFAULT_POLL_S:g}"
    )
    return per_hour


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="Measured span per arm.")
    parser.add_argument("--poll-s", type=float, default=0.5, help="The watcher's poll_s.")
    parser.add_argument("--traffic-lines", type=int, default=2000, help="Exchanges logged.")
    args = parser.parse_args()
    print(f"traffic log: {args.traffic_lines} exchanges, half with feedback; nothing fires")
    figures = {}
    for arm, flowing in (("no new traffic", False), ("traffic flowing (10/s)", True)):
        with tempfile.TemporaryDirectory() as tmp:
            config = write_world(Path(tmp), args.poll_s, args.traffic_lines)
            cpu, n, wall = measure_watcher(config, args.seconds, flowing)
        figures[arm] = report(arm, cpu, n, wall, args.poll_s)
    sleep_cpu, sleep_wall = measure_sleep(args.seconds)
    sleep_per_hour = sleep_cpu / sleep_wall * 3600
    print(f"sleep: CPU {sleep_cpu:.2f} s in {sleep_wall:.1f} s → {sleep_per_hour:.2f} CPU s/hour")
    tick = 0.01  # psutil's resolution: a process that used none is floored at one tick
    floor = max(sleep_per_hour, tick * 3600 / sleep_wall)
    for arm, per_hour in figures.items():
        print(f"ratio watcher/sleep, {arm}: {per_hour / floor:.0f}× (sleep floored at one tick)")


if __name__ == "__main__":
    main()
