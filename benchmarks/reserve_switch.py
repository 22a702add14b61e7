"""Re-serving a champion under load: how long a switch takes and what clients notice.

    .venv/bin/python benchmarks/reserve_switch.py                     # 4 clients, 2 switches
    .venv/bin/python benchmarks/reserve_switch.py --clients 8 --switches 3 --quiet-s 10

Goal: zero failed requests during a switch, and latency during it close to a quiet period's.

`ManagedService` serves `examples/arith/model` (the committed tiny model) behind `tuneloop
proxy` with the traffic log on. `--clients` threads send chat completions with the official
`openai` client, closed loop (each sends its next request when the last one returns), the
whole time. First a quiet period of `--quiet-s` seconds, then `--switches` switches in a row
between two copies of the model (v2, v3, …), each followed by another quiet period. Printed:
each switch's wall time (start of the new server to the old one stopped), then requests,
failures, throughput and p50/p99 latency for the quiet periods and for the switch windows.

Read it with the machine in mind: on a small CPU machine the new server's loading competes
with the old one's generation for the same cores, so a switch window is slower for that
reason alone; the number that must not move is failures.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

MODEL = Path(__file__).resolve().parents[1] / "examples" / "arith" / "model"


@dataclass
class Load:
    url: str
    done: list[tuple[float, float, bool]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    errors: list[str] = field(default_factory=list)

    def worker(self, index: int) -> None:
        import openai

        client = openai.OpenAI(base_url=self.url, api_key="unused", max_retries=0, timeout=120)
        messages = [{"role": "user", "content": f"{index}+{index % 7}="}]
        while not self.stop.is_set():
            began, ok = time.monotonic(), True
            try:
                client.chat.completions.create(
                    model="champion",
                    messages=messages,  # type: ignore[arg-type]
                    max_tokens=8,
                )
            except Exception as err:
                ok = False
                self.errors.append(f"{type(err).__name__}: {err}")
            self.done.append((began, time.monotonic(), ok))


def summary(name: str, rows: list[tuple[float, float, bool]], seconds: float) -> str:
    latencies = sorted(end - began for began, end, _ in rows)
    if not latencies:
        return f"{name:<8} no requests"
    failed = sum(not ok for _, _, ok in rows)
    p50 = statistics.median(latencies) * 1000
    p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] * 1000
    return (
        f"{name:<8} {len(rows):>6} requests {failed:>3} failed {len(rows) / seconds:>7.1f} req/s "
        f"p50 {p50:>6.1f} ms  p99 {p99:>7.1f} ms  over {seconds:.1f} s"
    )


def within(rows: list[tuple[float, float, bool]], start: float, end: float) -> list:
    """Requests that began inside [start, end)."""
    return [r for r in rows if start <= r[0] < end]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--switches", type=int, default=2)
    parser.add_argument("--quiet-s", type=float, default=5.0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per server")
    args = parser.parse_args()

    from tuneloop.config import ServerConfig
    from tuneloop.flywheel.service import ManagedService, ServiceSettings

    with tempfile.TemporaryDirectory(prefix="tuneloop-reserve-") as tmp:
        root = Path(tmp)
        models = []
        for version in range(1, args.switches + 2):
            models.append(root / f"v{version}")
            shutil.copytree(MODEL, models[-1])
        settings = ServiceSettings(
            state_dir=root / "state",
            port=0,
            log_dir=root / "traffic",
            server=ServerConfig(threads=args.threads),
        )
        service = ManagedService(settings, log=lambda line: print(f"  service: {line}"))
        began = time.monotonic()
        service.start(models[0], 1)
        print(f"start: {time.monotonic() - began:.1f} s (server ready, then the proxy)")
        assert service.url is not None
        load = Load(service.url)
        workers = [
            threading.Thread(target=load.worker, args=(i,), daemon=True)
            for i in range(args.clients)
        ]
        quiet: list[tuple[float, float]] = []
        switching: list[tuple[float, float]] = []
        try:
            for worker in workers:
                worker.start()
            for version, model in enumerate(models, start=1):
                if version > 1:
                    t0 = time.monotonic()
                    service.switch_to(model, version)
                    switching.append((t0, time.monotonic()))
                    print(f"switch to v{version}: {switching[-1][1] - t0:.1f} s")
                t0 = time.monotonic()
                time.sleep(args.quiet_s)
                quiet.append((t0, time.monotonic()))
        finally:
            load.stop.set()
            for worker in workers:
                worker.join()
            service.stop()
            service.close()

    rows = list(load.done)
    quiet_rows = [r for a, b in quiet for r in within(rows, a, b)]
    switch_rows = [r for a, b in switching for r in within(rows, a, b)]
    print()
    print(f"{args.clients} clients, closed loop, max_tokens 8, {len(rows)} requests in all")
    print(summary("quiet", quiet_rows, sum(b - a for a, b in quiet)))
    print(summary("switch", switch_rows, sum(b - a for a, b in switching)))
    if load.errors:
        print(f"failures: {len(load.errors)}; first: {load.errors[0]}")
    return 1 if load.errors else 0


if __name__ == "__main__":
    sys.exit(main())
