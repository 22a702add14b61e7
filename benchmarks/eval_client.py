"""Eval client throughput: tuneloop's runner vs lm-evaluation-harness vs a bare httpx loop.

    .venv/bin/python benchmarks/eval_client.py                       # fake server, defaults
    .venv/bin/python benchmarks/eval_client.py --delay-ms 20 --concurrency 64
    .venv/bin/python benchmarks/eval_client.py --endpoint http://127.0.0.1:8000 --model tiny

All the clients send the same chat requests (one per item × sample) at the same concurrency
to the same server in the same run, in interleaved rounds; the median of the rounds is
reported. Goals: tuneloop ≥ 1.5× lm-eval's `local-chat-completions` (installed by
`scripts/setup --bench`; without it this exits 2 before measuring), and, on the instant
server, ≥ 0.8 of the server's raw capacity as the best bare loop (httpx, or asyncio streams:
no scoring, no log) sees it, at ≤ 120 µs of client CPU a sample (issue 35). tuneloop's number
includes everything the runner does: scoring, redaction, the fsynced sample log and the
summary. By default the server is a tiny uvicorn app in its own process (so it does not share
the client's GIL) answering instantly or after `--delay-ms`.

Read the CPU per sample first: it is robust to other load on the machine, which throughput is
not. On 2 cores the server and the client each take one, so on the instant server tuneloop's
throughput is its CPU per sample's inverse, and the bare loops' is the server's.
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

import httpx
from peers import require  # benchmarks/ is on sys.path when run

REPLY = json.dumps(
    {
        "id": "bench",
        "object": "chat.completion",
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


def serve(port: int, delay_s: float) -> None:
    """The fake OpenAI server: a bare ASGI app (no framework) under uvicorn."""
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
        app,
        host="127.0.0.1",
        port=port,
        log_level="error",
        lifespan="off",
        access_log=False,
        backlog=4096,
    )


Sample = tuple[int, float, float]
"""(samples, wall seconds, client CPU seconds) of one timed run."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(delay_ms: float) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port), "--delay-ms", str(delay_ms)]
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            httpx.post(url + "/v1/chat/completions", json={}, timeout=1)
            return proc, url
        except httpx.TransportError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("fake server did not start")


def make_suite(folder: Path, n_items: int) -> tuple[Path, list[list[dict[str, str]]]]:
    rows, chats = [], []
    for i in range(n_items):
        a, b = i % 97, i % 89
        messages = [{"role": "user", "content": f"What is {a} + {b}?"}]
        rows.append({"id": f"q{i:05d}", "messages": messages, "answer": str(a + b)})
        chats.append(messages)
    path = folder / "suite.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path, chats


async def raw_loop(url: str, model: str, chats: list, n: int, conc: int, max_tokens: int) -> int:
    """The server's capacity as a bare async httpx loop sees it: post, read, nothing else."""
    payloads = iter(
        {"model": model, "messages": m, "max_tokens": max_tokens, "temperature": 0.0, "seed": k}
        for m in chats
        for k in range(n)
    )
    done = 0
    limits = httpx.Limits(max_connections=conc, max_keepalive_connections=conc)
    async with httpx.AsyncClient(limits=limits, timeout=120) as client:

        async def worker() -> None:
            nonlocal done
            for body in payloads:
                r = await client.post(url + "/v1/chat/completions", json=body)
                r.json()
                done += 1

        await asyncio.gather(*(worker() for _ in range(conc)))
    return done


async def raw_streams(url: str, model: str, chats: list, n: int, conc: int, max_tokens: int) -> int:
    """The same as bare asyncio streams: one keep-alive connection per worker, no library."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    bodies = iter(
        json.dumps(
            {"model": model, "messages": m, "max_tokens": max_tokens, "temperature": 0.0, "seed": k}
        ).encode()
        for m in chats
        for k in range(n)
    )
    done = 0

    async def worker() -> None:
        nonlocal done
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        for body in bodies:
            writer.write(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\n"
                b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                % (parts.netloc.encode(), len(body), body)
            )
            head = (await reader.readuntil(b"\r\n\r\n")).lower()
            start = head.index(b"content-length:") + 15
            json.loads(await reader.readexactly(int(head[start : head.index(b"\r\n", start)])))
            done += 1
        writer.close()

    await asyncio.gather(*(worker() for _ in range(conc)))
    return done


def run_raw(
    url: str, model: str, chats: list, n: int, conc: int, max_tokens: int, loop=raw_loop
) -> float:  # type: ignore[no-untyped-def]
    t, c = time.perf_counter(), time.process_time()
    done = asyncio.run(loop(url, model, chats, n, conc, max_tokens))
    return done, time.perf_counter() - t, time.process_time() - c


def run_tuneloop(url: str, model: str, suite: Path, n: int, conc: int, max_tokens: int) -> Sample:
    from tuneloop.evaluate import EvalSettings, evaluate

    with tempfile.TemporaryDirectory() as out:
        t, c = time.perf_counter(), time.process_time()
        summary = evaluate(
            url,
            model,
            suite,
            Path(out) / "log",
            EvalSettings(n_samples=n, concurrency=conc, max_tokens=max_tokens),
            progress=False,
        )
        elapsed, cpu = time.perf_counter() - t, time.process_time() - c
    assert summary.counts["ok"] == summary.counts["expected"], summary.counts
    return summary.counts["ok"], elapsed, cpu


def run_lm_eval(url: str, model: str, chats: list, n: int, conc: int, max_tokens: int) -> Sample:
    from lm_eval.api.instance import Instance
    from lm_eval.models.api_models import JsonChatStr
    from lm_eval.models.openai_completions import LocalChatCompletion

    lm = LocalChatCompletion(
        base_url=url + "/v1/chat/completions",
        model=model,
        num_concurrent=conc,
        max_retries=3,
        tokenized_requests=False,
        tokenizer_backend=None,
        max_gen_toks=max_tokens,
    )
    gen = {"until": [], "max_gen_toks": max_tokens, "temperature": 0.0}
    reqs = [
        Instance(
            request_type="generate_until",
            doc={},
            idx=k,
            arguments=(JsonChatStr(json.dumps(m)), dict(gen)),
        )
        for m in chats
        for k in range(n)
    ]
    t, c = time.perf_counter(), time.process_time()
    out = lm.generate_until(reqs, disable_tqdm=True)
    elapsed, cpu = time.perf_counter() - t, time.process_time() - c
    assert len(out) == len(reqs) and all(isinstance(o, str) for o in out)
    return len(out), elapsed, cpu


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    p.add_argument("--endpoint", help="Use this server instead of the fake one.")
    p.add_argument("--model", default="bench")
    p.add_argument("--items", type=int, default=2000)
    p.add_argument("--n-samples", type=int, default=1)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--delay-ms", type=float, default=0.0, help="Fake server latency.")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    if args.serve:
        serve(args.serve, args.delay_ms / 1000)
        return
    require("lm_eval", what="lm-eval (the peer `local-chat-completions`)")
    server, url = (
        (None, args.endpoint.rstrip("/")) if args.endpoint else start_server(args.delay_ms)
    )
    url = url.removesuffix("/v1")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            suite, chats = make_suite(Path(tmp), args.items)
            common = (args.n_samples, args.concurrency, args.max_tokens)
            runners = {
                "raw httpx loop": lambda: run_raw(url, args.model, chats, *common),
                "raw asyncio-streams loop": lambda: run_raw(
                    url, args.model, chats, *common, loop=raw_streams
                ),
                "tuneloop": lambda: run_tuneloop(url, args.model, suite, *common),
                "lm-eval local-chat-completions": lambda: run_lm_eval(
                    url, args.model, chats, *common
                ),
            }
            report(runners, args)
    finally:
        if server is not None:
            server.terminate()
            server.wait()


def report(runners: dict, args: argparse.Namespace) -> None:
    """Interleaved rounds; prints median throughput and client CPU per sample, and ratios.

    Client CPU per sample (process time of this process, all threads) is printed beside
    throughput because it is robust to other load on the machine, which throughput is not.
    """
    results: dict[str, list[Sample]] = {name: [] for name in runners}
    errors: dict[str, str] = {}
    runners["raw asyncio-streams loop"]()  # warm-up: server, connections, imports
    for _ in range(args.rounds):
        for name, fn in runners.items():
            if name in errors:
                continue
            try:
                results[name].append(fn())
            except Exception as err:  # an arm that fails leaves no table: say why, exit 1
                errors[name] = f"{type(err).__name__}: {err}"[:300]
    if errors:
        for name, err in errors.items():
            print(f"  {name:32s} could not run: {err}", file=sys.stderr)
        raise SystemExit(1)
    print(
        f"\n{args.items} items × {args.n_samples} samples, concurrency {args.concurrency}, "
        f"server delay {args.delay_ms} ms, {args.rounds} rounds (median), "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}"
    )
    rate = {k: statistics.median(n / w for n, w, _ in v) for k, v in results.items() if v}
    cpu = {k: statistics.median(1e6 * c / n for n, _, c in v) for k, v in results.items() if v}
    for name in rate:
        rounds = ", ".join(f"{n / w:.0f}" for n, w, _ in results[name])
        print(
            f"  {name:32s} {rate[name]:8.0f} samples/s  {cpu[name]:7.0f} µs CPU/sample"
            f"   rounds: {rounds}"
        )
    raw = max((v for k, v in rate.items() if k.startswith("raw")), default=None)
    if "tuneloop" in rate and raw:
        print(
            f"tuneloop / raw capacity (best bare loop): {rate['tuneloop'] / raw:.3f}  (goal ≥ 0.8)"
        )
        print(f"tuneloop CPU per sample:                  {cpu['tuneloop']:.0f} µs  (goal ≤ 120)")
    lm = "lm-eval local-chat-completions"
    if "tuneloop" in rate and lm in rate:
        print(
            f"tuneloop / lm-eval throughput:            {rate['tuneloop'] / rate[lm]:.3f}  "
            "(goal ≥ 1.5)"
        )
        print(f"lm-eval / tuneloop CPU per sample:        {cpu[lm] / cpu['tuneloop']:.3f}")


if __name__ == "__main__":
    main()
