"""Benchmark: training memory on a real 131k vocabulary — every method, and the composite
objective's self-distillation term chunked (tuneloop) against full logits (the textbook loss).

The model is the family matrix's Mistral (`examples/families`, the real Tekken tokenizer of
`mistral_common`, 131,072 tokens, hidden 64): tiny layers under a production vocabulary, so the
vocabulary-sized tensors are what the memory is made of. Each arm runs in its own child process;
the figure is the child's peak RSS above its RSS once the model is loaded (`ru_maxrss` minus the
resident set measured just before the measured work), median of `--runs`.

- `sft`, `grpo`, `dpo`, `composite`: `tuneloop.train.run.train` for 2 steps, batch 4, as the
  matrix's cells do (the composite with α = 0.5, β = 0.5 and replay pairs).
- `kl-chunked` vs `kl-full`: one forward and backward of the self-distillation loss alone, on a
  fixed batch (8 completions of `--tokens` tokens after a 16-token prompt), LoRA on every linear
  layer: `selfdistill.chunked_divergence` (reverse KL) over the final hidden states, against
  `divergence.divergence_loss` over both models' full B×T×V logits. The ratio full / chunked
  is printed, with both losses (equal: the chunked loss is exact).

Run: `python benchmarks/vocab_memory.py [--runs 3] [--tokens 128]` (a few minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from peers import require  # benchmarks/ is on sys.path when run

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ROOT / "examples" / "families"
METHODS = ("sft", "grpo", "dpo", "composite")
KL_ARMS = ("kl-chunked", "kl-full")


def _rss_mib() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def child_method(method: str, model: Path, data: dict[str, Path], out: Path) -> dict[str, Any]:
    sys.path.insert(0, str(FAMILIES))
    import matrix

    from tuneloop.train.run import train

    extra: dict[str, Any] = {}
    rows = data["pairs"] if method == "dpo" else data["prompts"]
    if method == "composite":
        extra["composite"] = {"alpha": 0.5, "beta": 0.5, "pairs": str(data["pairs"])}
    settings = matrix.settings(method, **extra)
    import torch
    import trl  # noqa: F401 - imported before the baseline, as training imports it

    torch.set_num_threads(1)
    base = _rss_mib()
    train(model, rows, out, settings, progress=False)
    return {"peak_above_load_mib": _peak_mib() - base}


def child_kl(arm: str, model_dir: Path, tokens: int) -> dict[str, Any]:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from tuneloop.train.methods.divergence import Divergence, divergence_loss
    from tuneloop.train.methods.selfdistill import (
        chunked_divergence,
        completion_logits,
        completion_states,
        head_logits,
    )

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules="all-linear"))
    vocab = model.config.vocab_size
    prompt = torch.randint(1000, vocab, (8, 16))
    hinted = torch.randint(1000, vocab, (8, 24))
    completion = torch.randint(1000, vocab, (8, tokens))
    ones = torch.ones_like
    base = _rss_mib()
    if arm == "kl-full":
        student = completion_logits(model, prompt, ones(prompt), completion, ones(completion))
        with torch.no_grad():
            teacher = completion_logits(model, hinted, ones(hinted), completion, ones(completion))
        loss = divergence_loss(student, teacher, ones(completion).float(), Divergence())
    else:
        student_h = completion_states(model, prompt, ones(prompt), completion, ones(completion))
        with torch.no_grad():
            teacher_h = completion_states(model, hinted, ones(hinted), completion, ones(completion))
        loss = chunked_divergence(
            lambda h: head_logits(model, h),
            student_h.hidden,
            teacher_h.hidden,
            ones(completion).float(),
            1.0,
            Divergence(),  # reverse KL, the default
        )
    loss.backward()
    return {"peak_above_load_mib": _peak_mib() - base, "loss": float(loss)}


def _child(arm: str, model: Path, data: Path, tokens: int) -> dict[str, Any]:
    args = [sys.executable, __file__, "--child", arm, "--model", str(model), "--data", str(data)]
    done = subprocess.run(
        [*args, "--tokens", str(tokens)], capture_output=True, text=True, timeout=1200
    )
    if done.returncode != 0:
        raise SystemExit(f"{arm} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--child", choices=(*METHODS, *KL_ARMS))
    parser.add_argument("--model", type=Path)
    parser.add_argument("--data", type=Path)
    args = parser.parse_args()
    require("mistral_common", what="mistral_common (the Tekken vocabulary)")
    if args.child:
        if args.child in KL_ARMS:
            out = child_kl(args.child, args.model, args.tokens)
        else:
            data = {k: args.data / f"{k}.jsonl" for k in ("prompts", "pairs")}
            with tempfile.TemporaryDirectory() as tmp:
                out = child_method(args.child, args.model, data, Path(tmp) / "out")
        print(json.dumps(out))
        return 0
    sys.path.insert(0, str(FAMILIES))
    from build_families import build_family
    from matrix import write_data

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    with tempfile.TemporaryDirectory() as tmp:
        model = build_family("mistral", Path(tmp) / "mistral")
        write_data(Path(tmp) / "data")
        print("Mistral family model, vocabulary 131,072; peak RSS in MiB above the child's")
        print(f"start (see the docstring), median of {args.runs} runs\n")
        print("| arm | peak MiB (median) | runs |")
        print("|---|---|---|")
        medians: dict[str, float] = {}
        losses: dict[str, float] = {}
        for arm in (*METHODS, *KL_ARMS):
            runs = [_child(arm, model, Path(tmp) / "data", args.tokens) for _ in range(args.runs)]
            peaks = [r["peak_above_load_mib"] for r in runs]
            medians[arm] = statistics.median(peaks)
            if "loss" in runs[0]:
                losses[arm] = runs[0]["loss"]
            shown = ", ".join(f"{p:.0f}" for p in peaks)
            print(f"| {arm} | {medians[arm]:.0f} | {shown} |", flush=True)
    ratio = medians["kl-full"] / max(medians["kl-chunked"], 1.0)
    print(
        f"\nself-distillation, 8 × {args.tokens} completion tokens: full logits / chunked = "
        f"{ratio:.2f}x the memory; losses {losses['kl-full']:.6f} (full) vs "
        f"{losses['kl-chunked']:.6f} (chunked)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
