"""Benchmark: the memory planner's training estimate against measured peaks on real shapes.

Two random-weight models with the exact shapes of Qwen2-0.5B (hidden 896, 24 layers, 14
heads, 2 kv heads, intermediate 4864, vocabulary 151,936, tied) and Qwen2-1.5B (hidden 1536,
28 layers, 12 heads, 2 kv heads, intermediate 8960, same vocabulary), built with
transformers (nothing downloaded; the family matrix's 640-token Qwen2 tokenizer stands in
for the real one, whose ids all fall inside the vocabulary). Each cell trains two steps of
tuneloop's own SFT trainer (`tuneloop.train.methods.sft`) on CPU in a child process, rows
longer than `max_length` with one short row so the batch is padded, as the preflight
assumes. The child loads the model and builds the trainer, records its resident set
(`VmRSS`), resets the kernel's high-water mark (`/proc/self/clear_refs`, Linux) and trains;
it reports the high-water mark (`VmHWM`). Each cell runs twice: under glibc's default
allocator, as a real run does, and with its mmap threshold fixed (`FIXED`, as the unit test
`tests/memory/test_training.py` runs). By default glibc raises its mmap threshold after
each large free, up to 32 MiB, so a model whose per-layer tensors are megabytes to tens of
megabytes has them carved from a heap that it does not give back: the process holds more
than is alive, and more with every step. The estimate is of what is alive.

The peer is the estimate of the plan `tuneloop check` makes for the same `train:` section
(`loop/preflight/training_fit.training_plan`, `tuneloop.memory.training_memory`); the ratio
is measured / estimated, for the whole peak and for what training adds to a loaded model
(the estimate's `dynamic`: its peak less the weights and the runtime). The estimate's
runtime counts a real 151,936-entry tokenizer (~0.17 GiB) that the stand-in does not have,
so the whole-peak ratio reads a little low by construction.

The float32 full fine-tune of the 1.5B shape is not run: the planner refuses it on a 24 GiB
machine (16 bytes per parameter, 23 GiB before any activation), and the script prints that
refusal and the settings it names instead.

Run: `python benchmarks/memory_plan.py [--runs 1]` (about 12 minutes on 2 cores, ~10 GiB RAM).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ROOT / "examples" / "families"
SHAPES = {
    "qwen2-0.5b": {"hidden_size": 896, "num_hidden_layers": 24, "num_attention_heads": 14,
                   "intermediate_size": 4864},
    "qwen2-1.5b": {"hidden_size": 1536, "num_hidden_layers": 28, "num_attention_heads": 12,
                   "intermediate_size": 8960},
}  # fmt: skip
COMMON = {
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "tie_word_embeddings": True,
    "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-6,
}
CELLS: list[tuple[str, str, dict[str, Any]]] = [
    ("qwen2-0.5b", "LoRA fp32, 4×256", {"adapter": "lora", "batch_size": 4, "max_length": 256}),
    (
        "qwen2-0.5b",
        "LoRA bf16 autocast, 2×256",
        {"adapter": "lora", "batch_size": 2, "max_length": 256, "distributed": {"bf16": True}},
    ),
    ("qwen2-0.5b", "full fp32, 1×128", {"adapter": "none", "batch_size": 1, "max_length": 128}),
    ("qwen2-1.5b", "LoRA fp32, 1×128", {"adapter": "lora", "batch_size": 1, "max_length": 128}),
]
FIXED = "MALLOC_MMAP_THRESHOLD_=65536"
"""glibc's mmap threshold fixed (its dynamic raise after each large free turned off)."""
REFUSED = (
    "qwen2-1.5b",
    "full fp32, 1×128",
    {"adapter": "none", "batch_size": 1, "max_length": 128},
)


def build(name: str, out: Path) -> None:
    """Write a random-weight model of shape `name` (bf16 on disk) and the stand-in tokenizer."""
    sys.path.insert(0, str(FAMILIES))
    import torch
    from build_families import FAMILIES as FAMILY
    from build_families import tokenizer_for
    from transformers import AutoConfig, AutoModelForCausalLM

    tok = tokenizer_for(FAMILY["qwen2"])
    config = AutoConfig.for_model("qwen2", **SHAPES[name], **COMMON)
    config.eos_token_id = tok.convert_tokens_to_ids(tok.eos_token)
    config.pad_token_id = tok.convert_tokens_to_ids(tok.pad_token)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.save_pretrained(out)
    tok.save_pretrained(out)


def child(model: Path, settings: dict[str, Any]) -> dict[str, float]:
    """Train two steps; the resident set before and the high-water mark after."""
    import gc

    import torch

    from tuneloop.config import TrainConfig
    from tuneloop.train.common import load_model, load_tokenizer, quiet
    from tuneloop.train.methods.sft import build_sft_trainer

    torch.set_num_threads(max(os.cpu_count() or 1, 1))
    quiet()
    s = TrainConfig(**settings)
    long = " ".join(str(i % 10) for i in range(4 * s.max_length))
    short = " ".join(str(i % 10) for i in range(s.max_length // 4))
    rows = [
        {
            "messages": [
                {"role": "user", "content": "count"},
                {"role": "assistant", "content": short if i % s.batch_size == 0 else long},
            ]
        }
        for i in range(s.batch_size * s.steps)
    ]
    with tempfile.TemporaryDirectory() as out:
        trainer = build_sft_trainer(
            load_model(model, s), load_tokenizer(model), rows, s, out_dir=Path(out), nproc=1
        )
        gc.collect()
        before = _status("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")
        start = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - start
        return {"before": before, "peak": _status("VmHWM"), "seconds": seconds}


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def _run(args: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, *args],
        capture_output=True,
        text=True,
        timeout=1800,
        env={**os.environ, **(env or {})},
    )
    if done.returncode != 0:
        raise SystemExit(f"{args[:2]} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    lines = done.stdout.strip().splitlines()
    return dict(json.loads(lines[-1])) if lines else {}


def settings_of(cell: dict[str, Any]) -> dict[str, Any]:
    return {"method": "sft", "steps": 2, "learning_rate": 1e-5, **cell}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--build", help=argparse.SUPPRESS)
    parser.add_argument("--settings", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build:
        build(args.build, args.child)
        print("{}")
        return 0
    if args.child:
        print(json.dumps(child(args.child, json.loads(args.settings))))
        return 0

    from tuneloop.config import TrainConfig
    from tuneloop.loop.preflight.machine import read_machine
    from tuneloop.loop.preflight.training_fit import fixes, need, training_plan
    from tuneloop.memory import gib, model_shape, training_memory

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    machine = read_machine()
    print(f"CPU, {os.cpu_count()} cores, {gib(machine.ram)} GiB RAM; GiB; ratio = measured / "
          f"estimated; median of {args.runs} run(s); glibc: its default allocator, fixed: "
          f"{FIXED} (seconds: the 2 steps)\n")  # fmt: skip
    print("| model | cell | est. peak | glibc peak | ratio | est. added | glibc added | ratio "
          "| fixed added | ratio | s glibc | s fixed |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    ratios: dict[str, list[float]] = {"glibc": [], "fixed": []}
    with tempfile.TemporaryDirectory() as tmp:
        built: dict[str, Path] = {}
        for name, label, cell in CELLS:
            if name not in built:
                built[name] = Path(tmp) / name
                _run(["--build", name, "--child", str(built[name])])
            settings = settings_of(cell)
            shape = model_shape(json.loads((built[name] / "config.json").read_text()))
            assert shape is not None
            est = training_memory(shape, training_plan(TrainConfig(**settings), False, None))
            row = [name, label, gib(est.peak)]
            measured: dict[str, dict[str, float]] = {}
            for arm, env in (("glibc", {}), ("fixed", dict([FIXED.split("=")]))):
                child_args = ["--child", str(built[name]), "--settings", json.dumps(settings)]
                runs = [_run(child_args, env) for _ in range(args.runs)]
                measured[arm] = {
                    "peak": statistics.median(r["peak"] for r in runs),
                    "added": statistics.median(r["peak"] - r["before"] for r in runs),
                    "seconds": statistics.median(r["seconds"] for r in runs),
                }
                ratios[arm].append(measured[arm]["added"] / est.dynamic)
            g, f = measured["glibc"], measured["fixed"]
            row += [gib(g["peak"]), f"{g['peak'] / est.peak:.2f}", gib(est.dynamic)]
            row += [gib(g["added"]), f"{g['added'] / est.dynamic:.2f}"]
            row += [gib(f["added"]), f"{f['added'] / est.dynamic:.2f}"]
            row += [f"{g['seconds']:.0f}", f"{f['seconds']:.0f}"]
            print("| " + " | ".join(row) + " |", flush=True)
        name, label, cell = REFUSED
        shape = model_shape({**SHAPES[name], **COMMON, "model_type": "qwen2"})
        assert shape is not None
        train = TrainConfig(**settings_of(cell))
        needed = need(shape, train, False, None)
        fitting = fixes(shape, train, False, None, machine.ram)
        verdict = "refused" if needed > machine.ram else "fits"
        print(f"| {name} | {label} | {gib(needed)} | not run: {verdict} on "
              f"{gib(machine.ram)} GiB RAM | | | | | | | | |")  # fmt: skip
        print(f"\n{name} {label}: fits with " + ", or ".join(f.line() for f in fitting))
    for arm, values in ratios.items():
        print(f"median ratio of what training adds, {arm}: {statistics.median(values):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
