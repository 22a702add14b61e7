"""Embedded server vs `transformers serve` (continuous batching), same model, same requests.

Run: `.venv/bin/python benchmarks/serve_peer.py [--model DIR] [--repeats 3]
[--concurrency 1,8,32] [--long-max-tokens 256] [--no-peer] [--server-options JSON]`.

Goals (issue 17): at concurrency 32 the embedded server's throughput ≥ 2× the peer's; at
concurrency 1 its median latency within 3 ms of in-process `model.generate`; and the same with
10% of requests running to the token limit (`--long-max-tokens`; the case a static batcher
handles worst, since one long row used to hold its whole batch).

Both servers run the same checkpoint on the CPU with the same number of torch threads, and get
the same greedy chat requests (arith suite prompts, `max_tokens` 16, or the long limit for
every tenth request) from the same bare-asyncio client in this process; arms (and the
in-process `model.generate` baseline) alternate within each repeat and the median over repeats
is printed with the ratio embedded / peer. Greedy decoding
makes both do the same work: completion tokens are counted and printed, and must match.

The default model is a random-weight copy of `examples/arith/model`'s architecture and
tokenizer with a 1024-token context (built in a temp folder): the real model's 128-token
context cannot hold a long completion and its answers end after 2–4 tokens, while random
weights rarely end a turn, so requests run to their `max_tokens`. `--model` serves any folder
instead. `transformers serve` needs nothing beyond this project's dependencies (FastAPI,
uvicorn); if it is missing or fails to start, that arm is reported with its error and the
in-process generate baseline still runs. Numbers are only comparable within one run on one
machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from tuneloop.config import ServeConfig
from tuneloop.serve.lifecycle import free_port
from tuneloop.serving import serving

ROOT = Path(__file__).resolve().parents[1]
ARITH = ROOT / "examples/arith/model"


def random_model(out: Path, context: int = 1024, seed: int = 0) -> Path:
    """examples/arith/model's architecture and tokenizer, random weights, a longer context."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

    config = AutoConfig.from_pretrained(ARITH)
    config.max_position_embeddings = context
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.generation_config = GenerationConfig.from_pretrained(ARITH)
    model.save_pretrained(out)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(ARITH / name, out / name)
    tok_config = json.loads((out / "tokenizer_config.json").read_text())
    tok_config["model_max_length"] = context
    (out / "tokenizer_config.json").write_text(json.dumps(tok_config))
    return out


def requests(n: int, long_every: int, long_max: int) -> list[dict[str, Any]]:
    items = [json.loads(line) for line in (ROOT / "examples/arith/suite.jsonl").open()]
    return [
        {
            "messages": items[i % len(items)]["messages"],
            "temperature": 0.0,
            "max_tokens": long_max if long_every and i % long_every == long_every - 1 else 16,
        }
        for i in range(n)
    ]


async def _post(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, path: str, body: bytes
) -> dict[str, Any]:
    writer.write(
        b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (path.encode(), host.encode(), len(body), body)
    )
    head = (await reader.readuntil(b"\r\n\r\n")).lower()
    if not head.startswith(b"http/1.1 200"):
        raise RuntimeError(head.decode(errors="replace"))
    at = head.index(b"content-length:") + 15
    return dict(json.loads(await reader.readexactly(int(head[at : head.index(b"\r\n", at)]))))


async def run_arm(
    base_url: str, model: str, reqs: list[dict[str, Any]], concurrency: int
) -> dict[str, Any]:
    """Throughput, latency percentiles and completion tokens at `concurrency` in flight.

    The client is bare asyncio streams, one keep-alive connection per worker: on a small
    machine it shares the cores with the server measured, so it should cost almost nothing.
    """
    url = urlsplit(base_url)
    path = f"{url.path}/chat/completions"
    todo = iter(reqs)
    latencies: list[float] = []
    tokens = 0

    async def worker() -> None:
        nonlocal tokens
        reader, writer = await asyncio.open_connection(url.hostname, url.port)
        for req in todo:
            body = json.dumps({"model": model, **req}).encode()
            t0 = time.perf_counter()
            reply = await _post(reader, writer, url.netloc, path, body)
            latencies.append(time.perf_counter() - t0)
            tokens += reply["usage"]["completion_tokens"]
        writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall = time.perf_counter() - start
    latencies.sort()
    return {
        "rps": len(reqs) / wall,
        "tok_s": tokens / wall,
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
        "tokens": tokens,
    }


@contextmanager
def transformers_serve(model: Path, threads: int, log: Path) -> Iterator[tuple[str, str]]:
    """`transformers serve MODEL --continuous-batching` on the CPU; yields (base_url, name)."""
    exe = Path(sys.executable).parent / "transformers"
    port = free_port("127.0.0.1")
    argv = [str(exe), "serve", str(model), "--continuous-batching", "--device", "cpu"]
    argv += ["--dtype", "float32", "--host", "127.0.0.1", "--port", str(port)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": str(threads)}
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 300
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"transformers serve did not start: {log.read_text()[-2000:]}")
            try:
                probe = {"model": str(model), "max_tokens": 2}
                probe["messages"] = [{"role": "user", "content": "1 + 1?"}]
                if httpx.post(f"{base}/chat/completions", json=probe, timeout=60).is_success:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        yield base, str(model)
    finally:
        proc.terminate()
        proc.wait(30)


class InProcess:
    """`model.generate` in this process, one greedy request at a time (no HTTP)."""

    def __init__(self, model_dir: Path, threads: int) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch.set_num_threads(threads)
        self.tok = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()

    def p50_ms(self, reqs: list[dict[str, Any]]) -> float:
        import torch

        times = []
        for req in reqs:
            t0 = time.perf_counter()
            ids = self.tok.apply_chat_template(
                req["messages"], add_generation_prompt=True, return_tensors="pt", return_dict=True
            )["input_ids"]
            with torch.inference_mode():
                out = self.model.generate(ids, do_sample=False, max_new_tokens=req["max_tokens"])
            self.tok.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
            times.append(time.perf_counter() - t0)
        return 1000 * statistics.median(times)


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def _report(case: str, c: int, ours: list[dict[str, Any]], peer: list[dict[str, Any]]) -> None:
    line = f"{case:9} c={c:<3} embedded {_median(ours, 'rps'):7.1f} req/s "
    line += f"{_median(ours, 'tok_s'):8.0f} tok/s p50 {_median(ours, 'p50_ms'):7.1f} ms "
    line += f"p99 {_median(ours, 'p99_ms'):7.1f} ms"
    if peer:
        ratio = _median(ours, "rps") / _median(peer, "rps")
        line += f" | peer {_median(peer, 'rps'):7.1f} req/s p50 {_median(peer, 'p50_ms'):7.1f} ms "
        line += f"p99 {_median(peer, 'p99_ms'):7.1f} ms | ratio {ratio:5.2f}x"
        line += f" | tokens {ours[0]['tokens']} vs {peer[0]['tokens']}"
    print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--concurrency", default="1,8,32")
    parser.add_argument("--requests", type=int, default=96, help="per arm at concurrency > 1")
    parser.add_argument("--sequential-requests", type=int, default=24)
    parser.add_argument("--long-max-tokens", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=max(1, min(4, (os.cpu_count() or 1) // 2)))
    parser.add_argument("--no-peer", action="store_true", help="skip transformers serve")
    parser.add_argument(
        "--server-options", default="{}", help='embedded options as JSON, e.g. {"batch_wait_ms": 0}'
    )
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    with tempfile.TemporaryDirectory(prefix="serve-peer-") as tmp:
        model = args.model or random_model(Path(tmp) / "model")
        print(f"model: {model}  cpus: {os.cpu_count()}  threads: {args.threads}", flush=True)
        cases = {"short": requests, "10% long": requests}
        inproc, gen_runs = InProcess(model, args.threads), []
        results: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
        opts = {"threads": args.threads, "max_tokens_cap": max(16, args.long_max_tokens)}
        opts |= json.loads(args.server_options)
        peer_cm = None if args.no_peer else transformers_serve(model, args.threads, Path(tmp) / "p")
        with serving(model, ServeConfig.model_validate(opts)) as ep:
            try:
                peer = peer_cm.__enter__() if peer_cm else None
            except RuntimeError as err:
                print(f"peer unavailable: {err}", flush=True)
                peer, peer_cm = None, None
            arms = {"embedded": (ep.base_url, ep.model)} | ({"peer": peer} if peer else {})
            for base, name in arms.values():  # warm-up
                asyncio.run(run_arm(base, name, requests(8, 0, 0), 4))
            for _ in range(args.repeats):
                gen_runs.append(inproc.p50_ms(requests(args.sequential_requests, 0, 0)))
                for case, make in cases.items():
                    long_every = 10 if case != "short" else 0
                    for c in levels:
                        n = args.sequential_requests if c == 1 else args.requests
                        reqs = make(n, long_every, args.long_max_tokens)
                        for arm, (base, name) in arms.items():
                            run = asyncio.run(run_arm(base, name, reqs, c))
                            results.setdefault((case, c, arm), []).append(run)
            if peer_cm:
                peer_cm.__exit__(None, None, None)
    gen = statistics.median(gen_runs)
    print(f"in-process model.generate, one at a time: p50 {gen:.1f} ms per request")
    for case in cases:
        for c in levels:
            _report(case, c, results[(case, c, "embedded")], results.get((case, c, "peer"), []))
    ours_c1 = _median(results[("short", 1, "embedded")], "p50_ms") if 1 in levels else None
    if ours_c1 is not None:
        print(f"c=1 latency: embedded p50 {ours_c1:.1f} ms vs generate {gen:.1f} ms "
              f"(difference {ours_c1 - gen:+.1f} ms; goal <= +3 ms)")  # fmt: skip


if __name__ == "__main__":
    main()
