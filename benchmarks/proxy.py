"""Proxy overhead: throughput and latency through `tuneloop proxy` vs straight to the upstream.

    .venv/bin/python benchmarks/proxy.py                          # fast fake upstream, c=32
    .venv/bin/python benchmarks/proxy.py --delay-ms 20 --repeats 7
    .venv/bin/python benchmarks/proxy.py --client raw             # a near-free client
    .venv/bin/python benchmarks/proxy.py --upstream model --requests 300 --client raw

Goal: proxied throughput ≥ 0.9× direct at concurrency 32, with the traffic log on.
Shadow mirroring (issue 33): the throughput of `proxy+log` with `--shadow` at fractions 1.0
and 0.1 against mirroring off (`proxy+log`), in the same run (`--no-shadow` leaves it out).

The arms get the same chat requests from the same client in this process, at the same
concurrency, in interleaved rounds (the order rotates every round); the median over rounds is
reported. `direct` posts to the upstream; `proxy` to `tuneloop proxy` without a log; `proxy+log`
to one with `--log-dir` (scrub, fsync'd group commit, rotation); `mirror 1` and `mirror 0.1`
to one with the log and `--shadow` to a challenger (a second fake upstream in its own process,
`--shadow-concurrency` mirrors in flight; sampled requests beyond them are skipped, counted).
The upstream is a bare ASGI app under uvicorn in its own process, answering at once (or
after `--delay-ms`, a stand-in for generation time); with `--upstream model` it is the real
peer instead: `tuneloop serve` on the embedded tiny model (`--model-dir`, default
examples/arith/model), asked for `max_tokens: 8`.
Each proxy is the installed command in its own process, as a person runs it.

Read the numbers with the machine in mind: client, proxy and upstream share its cores, so with
an instant upstream every request costs CPU in three processes instead of two and the proxied
arms are CPU-bound; with a realistic generation time the proxy's cost is only its added
latency. Both are printed so that neither hides the other. `server CPU` is the CPU time of the
arm's server processes per request, `proxy CPU` the proxy process's alone (the one to compare
across proxy versions: a real upstream's own CPU moves with how its batches fill).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

REPLY = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1780000000,
        "model": "bench",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "The answer is 42."},
            }
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 6, "total_tokens": 18},
    }
).encode()
HEADERS = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(REPLY))]
BODY: dict[str, Any] = {
    "model": "bench",
    "messages": [{"role": "user", "content": "What is 6 times 7?"}],
}
JSON = {"content-type": "application/json"}


def body_bytes(i: int) -> bytes:
    """Request `i`'s body: BODY with `"user": "bench-<i>"`, so that bodies differ as real
    traffic's do (the shadow mirror samples by the body's hash: one body is all in or out)."""
    return json.dumps({**BODY, "user": f"bench-{i}"}).encode()


MODEL_DIR = Path(__file__).resolve().parent.parent / "examples" / "arith" / "model"
FAILED: list[str] = []
"""Failed requests (arm URL, error): reported, never hidden in a rate."""


def serve_upstream(port: int, delay_s: float) -> None:
    """The fake upstream: a bare ASGI app (no framework) under uvicorn."""
    import uvicorn

    async def app(scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] != "http":
            return
        more = True
        while more:
            more = (await receive()).get("more_body", False)
        if delay_s:
            await asyncio.sleep(delay_s)
        await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
        await send({"type": "http.response.body", "body": REPLY})

    uvicorn.run(
        app, host="127.0.0.1", port=port, log_level="error", lifespan="off", access_log=False
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(url: str, proc: subprocess.Popen[bytes], patience_s: float = 120.0) -> None:
    """Until `url` answers a chat request; stops `proc` and exits if it never does."""
    deadline = time.monotonic() + patience_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{url}: the process exited with {proc.returncode}")
        try:
            httpx.post(url + "/v1/chat/completions", json=BODY, timeout=60).raise_for_status()
            return
        except httpx.TransportError:
            time.sleep(0.05)
    proc.terminate()
    raise SystemExit(f"{url} did not start in {patience_s:.0f} s")


def start_upstream(delay_ms: float) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    cmd = [sys.executable, __file__, "--serve-upstream", str(port), "--delay-ms", str(delay_ms)]
    proc = subprocess.Popen(cmd)
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, proc)
    return proc, url


def start_model(model_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`tuneloop serve MODEL_DIR` (the embedded server) answering as model `bench`."""
    port = free_port()
    cmd = [sys.executable, "-m", "tuneloop", "serve", str(model_dir), "--port", str(port)]
    proc = subprocess.Popen([*cmd, "--served-model-name", "bench"], stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, proc, patience_s=300.0)
    return proc, url


def start_proxy(
    upstream: str, log_dir: Path | None, extra: tuple[str, ...] = ()
) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    cmd = [sys.executable, "-m", "tuneloop", "proxy", "--upstream", upstream, "--port", str(port)]
    if log_dir is not None:
        cmd += ["--log-dir", str(log_dir)]
    cmd += list(extra)
    proc = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, proc)
    return proc, url


async def httpx_client(url: str, n: int, concurrency: int) -> list[float]:
    """Per-request latencies (s) of `n` chat requests over one pooled httpx.AsyncClient."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    todo = iter(range(n))
    latencies: list[float] = []
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:

        async def worker() -> None:
            for i in todo:
                start = time.perf_counter()
                try:
                    body = body_bytes(i)
                    reply = await client.post("/v1/chat/completions", content=body, headers=JSON)
                    reply.raise_for_status()
                    reply.json()
                except httpx.HTTPError as err:
                    FAILED.append(f"{url}: {type(err).__name__}: {err}")
                    continue
                latencies.append(time.perf_counter() - start)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies


async def raw_client(url: str, n: int, concurrency: int) -> list[float]:
    """The same over bare asyncio streams (one keep-alive connection per worker): the client
    costs almost nothing, so the servers' cost shows in full."""
    parts = urlsplit(url)
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
        % parts.netloc.encode()
    )
    todo = iter(range(n))
    latencies: list[float] = []

    async def worker() -> None:
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        for i in todo:
            start = time.perf_counter()
            body = body_bytes(i)
            writer.write(head + b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            got = (await reader.readuntil(b"\r\n\r\n")).lower()
            if not got.startswith(b"http/1.1 200"):
                raise RuntimeError(got.decode(errors="replace"))
            at = got.index(b"content-length:") + 15
            json.loads(await reader.readexactly(int(got[at : got.index(b"\r\n", at)])))
            latencies.append(time.perf_counter() - start)
        writer.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies


def timed(client: str, url: str, n: int, concurrency: int) -> tuple[float, float]:
    """(requests per second, median latency in ms) of one timed run."""
    run = httpx_client if client == "httpx" else raw_client
    start = time.perf_counter()
    latencies = asyncio.run(run(url, n, concurrency))
    elapsed = time.perf_counter() - start
    return len(latencies) / elapsed, 1000 * statistics.median(latencies)


Runs = dict[str, list[tuple[float, float, float, float]]]
"""arm → per round (requests/s, median latency ms, server-side CPU µs per request, the proxy
process's own CPU µs per request)."""


def measure(args: argparse.Namespace, arms: dict[str, tuple[str, list[int]]]) -> Runs:
    """Interleaved rounds over the arms; an arm's CPU is that of the server processes it
    uses (the upstream for `direct`; the upstream and the proxy, last, for a proxied arm).
    The proxy's own CPU is kept apart: the upstream's varies with how it is driven (a real
    server's batches), so the difference of totals is a noisy measure of the proxy."""
    import psutil

    names = list(arms)
    for name in names:  # warm up every connection pool and code path
        timed(args.client, arms[name][0], min(500, args.requests), args.concurrency)
    results: Runs = {name: [] for name in names}
    for r in range(args.repeats):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            url, pids = arms[name]
            procs = [psutil.Process(pid) for pid in pids]
            before = [sum(p.cpu_times()[:2]) for p in procs]
            rate, ms = timed(args.client, url, args.requests, args.concurrency)
            used = [sum(p.cpu_times()[:2]) - b for p, b in zip(procs, before, strict=True)]
            own = used[-1] if len(used) > 1 else 0.0
            results[name].append(
                (rate, ms, 1e6 * sum(used) / args.requests, 1e6 * own / args.requests)
            )
    return results


def upstream_name(args: argparse.Namespace) -> str:
    if args.upstream == "model":
        return f"tuneloop serve {args.model_dir} (max_tokens {BODY['max_tokens']})"
    return f"bare ASGI, delay {args.delay_ms} ms"


def report(args: argparse.Namespace, results: Runs) -> None:
    def median(name: str, field: int) -> float:
        return statistics.median(run[field] for run in results[name])

    direct, direct_ms, direct_cpu = (median("direct", i) for i in range(3))
    head = f"{'ratio':>6} {'server CPU':>11} {'proxy CPU':>10}"
    print(
        f"\n{args.requests} requests × {args.repeats} rounds, concurrency {args.concurrency}, "
        f"upstream {upstream_name(args)}, client {args.client}, {os.cpu_count()} CPUs"
    )
    print(f"{'arm':<10} {'req/s':>8} {'min..max':>12} {'p50 ms':>8} {head}")
    for name, runs in results.items():
        rates = [run[0] for run in runs]
        spread = f"{min(rates):.0f}..{max(rates):.0f}"
        print(
            f"{name:<10} {median(name, 0):>8.0f} {spread:>12} {median(name, 1):>8.2f} "
            f"{median(name, 0) / direct:>6.3f} {median(name, 2):>8.0f} µs "
            f"{median(name, 3):>7.0f} µs"
        )
    for name in results:
        if name == "direct":
            continue
        ratio = median(name, 0) / direct
        own, total = median(name, 3), median(name, 2) - direct_cpu
        print(
            f"{name}: {ratio:.3f}× direct throughput "
            f"({'meets' if ratio >= 0.9 else 'misses'} the 0.9 goal); "
            f"+{median(name, 1) - direct_ms:.2f} ms median latency; the proxy process uses "
            f"{own:.0f} µs CPU a request (≈{1e6 / max(1.0, own):.0f} req/s on one core); "
            f"all servers {total:+.0f} µs a request against direct"
        )


SHADOW_FRACTIONS = (1.0, 0.1)


def start_mirrors(
    args: argparse.Namespace, direct: str, tmp: Path, procs: list[subprocess.Popen[bytes]]
) -> dict[str, tuple[str, list[int]]]:
    """`proxy+log` with shadow mirroring to a challenger (a second fake upstream, its own
    process, as fast as the champion) at each of `SHADOW_FRACTIONS`; arm → (URL, pids: the
    upstream, the challenger, the proxy last)."""
    challenger, shadow = start_upstream(args.delay_ms)
    procs.append(challenger)
    arms = {}
    for fraction in SHADOW_FRACTIONS:
        extra = ("--shadow", shadow, "--shadow-model", "challenger")
        extra += ("--shadow-fraction", str(fraction))
        extra += ("--shadow-concurrency", str(args.shadow_concurrency))
        proc, url = start_proxy(direct, tmp / f"shadow-{fraction:g}", extra)
        procs.append(proc)
        arms[f"mirror {fraction:g}"] = (url, [procs[0].pid, challenger.pid, proc.pid])
    return arms


def report_mirrors(results: Runs, mirrors: dict[str, tuple[str, list[int]]]) -> None:
    """Each mirroring arm's throughput against mirroring off (`proxy+log`, the same log on),
    and what its mirror did (`/health`'s shadow counts)."""

    def rate(name: str) -> float:
        return statistics.median(run[0] for run in results[name])

    for name, (url, _) in mirrors.items():
        counts = httpx.get(url + "/health", timeout=10).json()["shadow"]["counts"]
        print(
            f"{name}: {rate(name) / rate('proxy+log'):.3f}× the throughput of mirroring off "
            f"(proxy+log); mirrored {counts['mirrored']}, skipped busy "
            f"{counts['skipped_busy']}, sampled out {counts['skipped_sampled_out']}, "
            f"failed {counts['failed']}, lost {counts['lost']}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--client", choices=["httpx", "raw"], default="httpx")
    parser.add_argument("--upstream", choices=["asgi", "model"], default="asgi")
    parser.add_argument("--model-dir", type=Path, default=MODEL_DIR)
    parser.add_argument(
        "--no-shadow", action="store_true", help="Leave out the shadow-mirroring arms."
    )
    parser.add_argument("--shadow-concurrency", type=int, default=8)
    parser.add_argument("--serve-upstream", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_upstream is not None:
        serve_upstream(args.serve_upstream, args.delay_ms / 1000)
        return
    procs: list[subprocess.Popen[bytes]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            if args.upstream == "model":
                BODY["max_tokens"] = 8
                upstream, direct = start_model(args.model_dir)
            else:
                upstream, direct = start_upstream(args.delay_ms)
            procs.append(upstream)
            bare, proxied = start_proxy(direct, None)
            procs.append(bare)
            logging, logged = start_proxy(direct, Path(tmp) / "traffic")
            procs.append(logging)
            arms = {
                "direct": (direct, [upstream.pid]),
                "proxy": (proxied, [upstream.pid, bare.pid]),
                "proxy+log": (logged, [upstream.pid, logging.pid]),
            }
            mirrors = {} if args.no_shadow else start_mirrors(args, direct, Path(tmp), procs)
            arms.update({name: (url, pids) for name, (url, pids) in mirrors.items()})
            results = measure(args, arms)
            lines = sum(1 for _ in (Path(tmp) / "traffic" / "traffic.jsonl").open())
            report(args, results)
            print(f"proxy+log wrote {lines} lines; failed requests: {len(FAILED)}")
            report_mirrors(results, mirrors)
            for failure in sorted(set(FAILED)):
                print(f"  {FAILED.count(failure)} × {failure}")
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    main()
