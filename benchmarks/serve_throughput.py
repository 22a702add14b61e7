"""Embedded server throughput: concurrent batched serving vs one request at a time.

Run: `.venv/bin/python benchmarks/serve_throughput.py [--model examples/arith/model]
[--concurrency 32] [--requests 128] [--repeats 5]`.

Starts the embedded server once (`serving(model)`) and measures completions per second for
chat requests taken from the arith suite (same sampling for every arm: temperature 0.7,
max_tokens 16, one seeded sample per request):
- **batched**: `--concurrency` clients in flight at once, so requests share decode batches;
- **sequential (peer)**: the same server and the same requests, one at a time;
- **hf generate**: in-process `model.generate` one prompt at a time (no HTTP), for reference.
The arms alternate within each repeat (a busy machine drifts); each arm's median is printed
with the ratio batched / sequential (the goal is ≥ 5×). Numbers are only comparable within one
run on one machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import httpx
from rich.progress import Progress

from tuneloop.config import ServeConfig
from tuneloop.endpoint import Endpoint
from tuneloop.serving import serving

ROOT = Path(__file__).resolve().parents[1]


def load_prompts(n: int) -> list[list[dict[str, str]]]:
    items = [json.loads(line) for line in (ROOT / "examples/arith/suite.jsonl").open()]
    return [items[i % len(items)]["messages"] for i in range(n)]


def body(ep: Endpoint, messages: list[dict[str, str]], seed: int) -> dict[str, Any]:
    return {
        "model": ep.model,
        "messages": messages,
        "temperature": 0.7,
        "max_tokens": 16,
        "seed": seed,
    }


async def run_arm(ep: Endpoint, prompts: list[list[dict[str, str]]], concurrency: int) -> float:
    """Completions per second with `concurrency` requests in flight.

    The client is aiohttp where installed (it comes with `datasets`): it costs a fraction of
    httpx's CPU per request, and on a small machine the client shares the cores with the
    server being measured.
    """
    try:
        import aiohttp
    except ImportError:
        return await _run_arm_httpx(ep, prompts, concurrency)
    gate = asyncio.Semaphore(concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency + 4)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(i: int, messages: list[dict[str, str]]) -> None:
            async with gate:
                url = f"{ep.base_url}/chat/completions"
                async with session.post(url, json=body(ep, messages, i)) as r:
                    r.raise_for_status()
                    await r.read()

        start = time.perf_counter()
        await asyncio.gather(*(one(i, m) for i, m in enumerate(prompts)))
        return len(prompts) / (time.perf_counter() - start)


async def _run_arm_httpx(
    ep: Endpoint, prompts: list[list[dict[str, str]]], concurrency: int
) -> float:
    gate = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency + 4)
    async with httpx.AsyncClient(limits=limits, timeout=600) as client:

        async def one(i: int, messages: list[dict[str, str]]) -> None:
            async with gate:
                r = await client.post(f"{ep.base_url}/chat/completions", json=body(ep, messages, i))
                r.raise_for_status()

        start = time.perf_counter()
        await asyncio.gather(*(one(i, m) for i, m in enumerate(prompts)))
        return len(prompts) / (time.perf_counter() - start)


def hf_generate_rate(model_dir: Path, prompts: list[list[dict[str, str]]]) -> float:
    """In-process `model.generate`, one prompt at a time (same settings, no HTTP)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(max(1, min(4, (os.cpu_count() or 1) // 2)))  # as the server
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    start = time.perf_counter()
    for messages in prompts:
        ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")
        ids = ids["input_ids"] if not torch.is_tensor(ids) else ids
        with torch.inference_mode():
            model.generate(ids, do_sample=True, temperature=0.7, max_new_tokens=16)
    return len(prompts) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=ROOT / "examples/arith/model")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--requests", type=int, default=128)
    parser.add_argument("--sequential-requests", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    batched_prompts = load_prompts(args.requests)
    seq_prompts = load_prompts(args.sequential_requests)
    batched: list[float] = []
    sequential: list[float] = []
    with serving(args.model, ServeConfig(max_batch_size=64)) as ep, Progress() as progress:
        task = progress.add_task("measuring", total=args.repeats * 2)
        asyncio.run(run_arm(ep, seq_prompts[:4], 4))  # warm-up
        for _ in range(args.repeats):
            batched.append(asyncio.run(run_arm(ep, batched_prompts, args.concurrency)))
            progress.advance(task)
            sequential.append(asyncio.run(run_arm(ep, seq_prompts, 1)))
            progress.advance(task)
    hf = [hf_generate_rate(args.model, seq_prompts) for _ in range(args.repeats)]
    b, s, h = (statistics.median(x) for x in (batched, sequential, hf))
    print(f"model: {args.model}  cpus: {os.cpu_count()}  repeats: {args.repeats}")
    print(f"batched (concurrency {args.concurrency}): {b:8.1f} completions/s  {batched}")
    print(f"sequential, same server (peer):   {s:8.1f} completions/s  {sequential}")
    print(f"hf generate in-process, one by one: {h:8.1f} completions/s  {hf}")
    print(f"ratio batched / sequential: {b / s:.1f}x  (goal >= 5x)")
    print(f"ratio batched / hf generate: {b / h:.1f}x")


if __name__ == "__main__":
    main()
