"""Proxy overhead: throughput and latency through `tuneloop proxy` vs straight to the upstream.

    .venv/bin/python benchmarks/proxy.py                          # fast fake upstream, c=32
    .venv/bin/python benchmarks/proxy.py --delay-ms 20 --repeats 7
    .venv/bin/python benchmarks/proxy.py --client raw             # a near-free client
    .venv/bin/python benchmarks/proxy.py --upstream model --requests 300 --client raw

Goal: proxied throughput ≥ 0.9× direct at concurrency 32, with the traffic log on.

Three arms get the same chat requests from the same client in this process, at the same
concurrency, in interleaved rounds (the order rotates every round); the median over rounds is
reported. `direct` posts to the upstream; `proxy` to `tuneloop proxy` without a log; `proxy+log`
to one with `--log-dir` (scrub, fsync'd group commit, rotation). The upstream is a bare ASGI app
under uvicorn in its own process, answering at once (or after `--delay-ms`, a stand-in for
generation time); with `--upstream model` it is the real peer instead: `tuneloop serve` on the
embedded tiny model (`--model-dir`, default examples/arith/model), asked for `max_tokens: 8`.
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


def start_proxy(upstream: str, log_dir: Path | None) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    cmd = [sys.executable, "-m", "tuneloop", "proxy", "--upstream", upstream, "--port", str(port)]
    if log_dir is not None:
        cmd += ["--log-dir", str(log_dir)]
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
            for _ in todo:
                start = time.perf_counter()
                try:
                    reply = await client.post("/v1/chat/completions", json=BODY)
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
    body = json.dumps(BODY).encode()
    request = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (parts.netloc.encode(), len(body), body)
    )
    todo = iter(range(n))
    latencies: list[float] = []

    async def worker() -> None:
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        for _ in todo:
            start = time.perf_counter()
            writer.write(request)
            head = (await reader.readuntil(b"\r\n\r\n")).lower()
            if not head.startswith(b"http/1.1 200"):
                raise RuntimeError(head.decode(errors="replace"))
            at = head.index(b"content-length:") + 15
            json.loads(await reader.readexactly(int(head[at : head.index(b"\r\n", at)])))
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--client", choices=["httpx", "raw"], default="httpx")
    parser.add_argument("--upstream", choices=["asgi", "model"], default="asgi")
    parser.add_argument("--model-dir", type=Path, default=MODEL_DIR)
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
            results = measure(args, arms)
            lines = sum(1 for _ in (Path(tmp) / "traffic" / "traffic.jsonl").open())
            report(args, results)
            print(f"proxy+log wrote {lines} lines; failed requests: {len(FAILED)}")
            for failure in sorted(set(FAILED)):
                print(f"  {FAILED.count(failure)} × {failure}")
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    main()
