"""The flywheel demo: users talk to the served champion while the watcher improves it, round
after round, on their traffic and feedback. From a clean checkout, after the README's set-up:

    .venv/bin/python examples/arith/flywheel_demo.py            # ≈ 6 minutes on 2 CPU cores

What runs: `tuneloop watch examples/arith/flywheel.yaml --max-rounds 3` (it serves the
bootstrap champion — the embedded tiny model — behind `tuneloop proxy` on 127.0.0.1:8100, logs
the traffic, and runs a round whenever a trigger fires), and the traffic simulator
(`simulate_traffic.py`: users whose wording drifts over time, feedback with corrections)
against the proxy until the watcher has settled three rounds. Then the served champion is
stopped and a summary printed: each round's trigger, slice, outcome and Δ, the champion
versions served, and the simulator's failed requests (a champion switch must cause none).

Everything lands in runs/flywheel/ (ledger, EXPERIMENT-LOG.md, rounds, archives, traffic); the
demo refuses to start over an existing one (`--fresh` moves it aside to runs/flywheel.<time>).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CONFIG = HERE / "flywheel.yaml"
WORKDIR = ROOT / "runs" / "flywheel"
PROXY = "http://127.0.0.1:8100"


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    if WORKDIR.exists():
        if not args.fresh:
            print(
                f"{WORKDIR} exists: pass --fresh to move it aside and start over", file=sys.stderr
            )
            return 2
        WORKDIR.rename(WORKDIR.with_name(f"flywheel.{datetime.now():%Y%m%d-%H%M%S}"))
    started = time.monotonic()
    watch = subprocess.Popen(
        [sys.executable, "-m", "tuneloop", "watch", str(CONFIG), "--max-rounds", str(args.rounds)]
    )
    try:
        _wait_for_proxy(watch)
        sim = _Simulator(args.requests, args.seed, args.rate)
        sim.start()
        code = watch.wait()
        sim.stop()
    finally:
        if watch.poll() is None:
            watch.terminate()
            watch.wait()
        _stop_service()
    _summary(sim.result, time.monotonic() - started)
    return code


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="rounds the watcher settles")
    ap.add_argument("--requests", type=int, default=3600, help="most simulated requests")
    ap.add_argument("--rate", type=float, default=10.0, help="requests started per second")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--fresh", action="store_true", help="move an existing runs/flywheel aside")
    return ap.parse_args(argv)


def _wait_for_proxy(watch: subprocess.Popen, timeout_s: float = 300.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if watch.poll() is not None:
            raise SystemExit(f"the watcher exited ({watch.returncode}) before serving")
        try:
            if httpx.get(f"{PROXY}/health", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1.0)
    raise SystemExit(f"the champion was not served at {PROXY} within {timeout_s:.0f} s")


class _Simulator(threading.Thread):
    """The users, in a thread: bounded by count, stopped when the watcher is done."""

    def __init__(self, n: int, seed: int, rate: float) -> None:
        super().__init__(daemon=True)
        self.n, self.seed, self.rate = n, seed, rate
        self.result: dict = {}
        self.out = WORKDIR / "simulator.json"

    def run(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "simulate_traffic.py"), "--base-url", f"{PROXY}/v1"]
            + ["--model", "champion", "-n", str(self.n), "--seed", str(self.seed)]
            + ["--interval", f"{1 / self.rate:g}", "--concurrency", "4", "--feedback-rate", "0.6"]
            + ["--max-tokens", "8", "--result", str(self.out)]
        )
        self.proc.wait()

    def stop(self) -> None:
        if getattr(self, "proc", None) is not None and self.proc.poll() is None:
            self.proc.terminate()  # the simulator stops starting requests and finishes its own
        self.join(timeout=60)
        if self.out.exists():
            self.result = json.loads(self.out.read_text())


def _stop_service() -> None:
    from tuneloop.flywheel.paths import FlywheelPaths
    from tuneloop.flywheel.service import ManagedService, ServiceSettings

    ManagedService(ServiceSettings(state_dir=FlywheelPaths(WORKDIR).service)).stop()


def _summary(sim: dict, wall_s: float) -> None:
    from tuneloop.gate.ledger import open_ledger

    with open_ledger(WORKDIR / "ledger.db") as ledger:
        history, champs = ledger.rounds(), ledger.champions()
    print(f"\nflywheel demo: {wall_s / 60:.1f} min wall")
    for r in history:
        start, last = r.start, r.last
        fired = ", ".join(start.trigger.get("fired", []))
        gate = last.gate if last else None
        delta = f"gate Δ {gate.delta:+.3f} p {gate.p_value:.3g}" if gate else ""
        print(
            f"  {r.round_id}: from v{start.parent_version}, trigger [{fired or 'manual'}], "
            f"{start.gate_slice or '-'}: {last.outcome if last else 'open'} {delta}"
        )
    print("  champions: " + ", ".join(f"v{c.version} ({c.via})" for c in champs))
    if sim:
        print(
            f"  simulator: {sim.get('requests')} requests, {sim.get('failures')} failed, "
            f"{sim.get('feedback_sent')} feedback"
        )
    print(f"  experiment log: {WORKDIR / 'EXPERIMENT-LOG.md'}")


if __name__ == "__main__":
    sys.exit(main())
