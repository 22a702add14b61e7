"""Benchmark: what logprobs and constrained decoding cost the embedded server, against the same
requests without them, in one run.

Run: `python benchmarks/serve_features.py [--model examples/arith/model] [--requests 64]
[--concurrency 16] [--max-tokens 24] [--rounds 3]`.

The engine is the server's own (`load_engine`, `create_app`), driven in-process over the ASGI
transport, greedy chat requests on the arith suite's prompts with `max_tokens` fixed. Arms, each
the same prompts: `plain`; `logprobs` (`logprobs: true, top_logprobs: 5`); `json_schema`
(`response_format` with a two-field schema, decoded under llguidance's mask). The constrained
arm's one-time cost (the process's first constrained answer) is paid before timing. No token
stops a row (the engine is built without stop tokens, and the schema's answer is longer than
any `max_tokens`), so every arm generates exactly the same number of tokens and differs only
in what it computes per token. Prints, median over `--rounds`, each arm's milliseconds per
token with one request at a time and its completion tokens per second at `--concurrency`,
each with its ratio to `plain`.

Measured 2026-12-02 on the demo model (this 2-core machine, idle; two runs alike to 0.02x):
logprobs 1.05x the time a token at concurrency 1 and 0.90x the throughput at 16; json_schema
1.22x and 0.60x. The constrained rows' masks are filled and applied row by row; llguidance's
batched executor (`fill_next_token_bitmask_par`, one call for all rows, one apply) measured no
better here (0.54x at 16: one executor thread on 2 cores), so it is not used.
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

from tuneloop.serve.embedded.constrain import Grammars
from tuneloop.serve.embedded.engine import Engine, load_engine
from tuneloop.serve.embedded.routes import ServerSettings, create_app

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = {
    "type": "object",
    "properties": {"digits": {"type": "string", "pattern": "^[0-9]{400}$"}},
    "required": ["digits"],
}
"""An answer no `max_tokens` here reaches the end of: every constrained row runs its full length."""
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
    loaded = load_engine(args.model, max_batch_size=64, batch_wait_ms=5)
    # No stop token: every row of every arm runs to max_tokens, so that the arms differ only
    # in what they compute per token (the grammar still knows the real one).
    engine = Engine(loaded.model, loaded.tokenizer, frozenset(), max_batch_size=64).start()
    engine.grammars = Grammars(loaded.tokenizer, engine.vocab_size, loaded.eos_ids)
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
    print(f"{args.requests} requests of {args.max_tokens} tokens each; ms a token at")
    print(f"concurrency 1 (16 requests), completion tok/s at concurrency {args.concurrency}")
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
