"""Benchmark: what logprobs and constrained decoding cost the embedded server, against the same
requests without them, in one run.

Run: `python benchmarks/serve_features.py [--model examples/arith/model] [--requests 64]
[--concurrency 16] [--max-tokens 24] [--rounds 3]`.

The engine is the server's own (`load_engine`, `create_app`), driven in-process over the ASGI
transport, greedy chat requests on the arith suite's prompts with `max_tokens` fixed. Arms, each
the same prompts: `plain`; `logprobs` (`logprobs: true, top_logprobs: 5`); `json_schema`
(`response_format` with a two-field schema, decoded under llguidance's mask). The constrained
arm's one-time cost (the process's first constrained answer) is paid before timing. Prints,
median over `--rounds`, each arm's milliseconds per generated token with one request at a time
(the cost itself: no batching effect) and its completion tokens per second at
`--concurrency`, each with its ratio to `plain`. Constrained answers run to a different length
than free ones (the demo model's JSON runs to `max_tokens`, its free answers stop after a few
tokens), so both columns carry a length effect: the per-request overhead spread over more
tokens in the first, a batch that stays full in the second. Measured 2026-12-02 (demo model, 2
cores): logprobs 1.02x the time a token and 0.94x the throughput of plain; json_schema 0.93x
and 2.01x, the length effect outweighing the mask.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

import httpx

from tuneloop.serve.embedded.engine import load_engine
from tuneloop.serve.embedded.routes import ServerSettings, create_app

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = {
    "type": "object",
    "properties": {
        "answer": {"type": "integer", "minimum": 0, "maximum": 9999},
        "unit": {"enum": ["apples", "pears"]},
    },
    "required": ["answer", "unit"],
    "additionalProperties": False,
}
ARMS: dict[str, dict[str, Any]] = {
    "plain": {},
    "logprobs": {"logprobs": True, "top_logprobs": 5},
    "json_schema": {
        "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA}}
    },
}


def prompts(n: int) -> list[str]:
    lines = (ROOT / "examples" / "arith" / "suite.jsonl").read_text().splitlines()
    return [json.loads(line)["messages"][-1]["content"] for line in lines[:n]]


async def arm(
    app: Any, texts: list[str], extra: dict[str, Any], args: argparse.Namespace, concurrency: int
) -> tuple[float, float]:
    """(completion tokens per second, median ms per token of one request) for `texts`."""
    transport = httpx.ASGITransport(app=app)
    queue = iter(texts)
    tokens = 0
    per_token: list[float] = []

    async with httpx.AsyncClient(transport=transport, base_url="http://b", timeout=600) as client:

        async def worker() -> None:
            nonlocal tokens
            for text in queue:
                sent = time.perf_counter()
                body = {
                    "model": "m",
                    "messages": [{"role": "user", "content": text}],
                    "max_tokens": args.max_tokens,
                    "temperature": 0,
                    **extra,
                }
                answer = await client.post("/v1/chat/completions", json=body)
                answer.raise_for_status()
                count = answer.json()["usage"]["completion_tokens"]
                tokens += count
                per_token.append((time.perf_counter() - sent) * 1e3 / count)

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return tokens / (time.perf_counter() - began), statistics.median(per_token)


async def main_async(args: argparse.Namespace) -> None:
    engine = load_engine(args.model, max_batch_size=64, batch_wait_ms=5).start()
    app = create_app(engine, "m", ServerSettings())
    texts = prompts(args.requests)
    await arm(app, texts[:2], ARMS["json_schema"], args, 1)  # llguidance's one-time tables
    alone: dict[str, list[float]] = {name: [] for name in ARMS}
    batched: dict[str, list[float]] = {name: [] for name in ARMS}
    for _ in range(args.rounds):
        for name, extra in ARMS.items():  # interleaved: drift hits every arm alike
            alone[name].append((await arm(app, texts[:16], extra, args, 1))[1])
            batched[name].append((await arm(app, texts, extra, args, args.concurrency))[0])
    engine.close()
    ms, rate = statistics.median(alone["plain"]), statistics.median(batched["plain"])
    print(f"{args.requests} requests, max_tokens {args.max_tokens}; ms a token at concurrency 1")
    print(f"(16 requests), completion tok/s at concurrency {args.concurrency} (arms whose")
    print("answers differ in length batch differently: the first column is the cost)")
    for name in ARMS:
        a, b = statistics.median(alone[name]), statistics.median(batched[name])
        print(
            f"  {name:12s} {a:7.2f} ms/token ({a / ms:4.2f}x)   {b:8.1f} tok/s ({b / rate:4.2f}x)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=ROOT / "examples" / "arith" / "model")
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=3)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
