"""Train the embedded default model from scratch: a ~1 M-parameter Qwen2 half-good at arithmetic.

Run: `python examples/arith/build_model.py [--steps N] [--out DIR]` (then
`python examples/arith/measure.py --write-card`). Takes ~2.5 CPU-minutes (one thread) and
writes `model/` (config, safetensors weights, generation config, tokenizer with chat template)
and `model/build_info.json` (steps, loss, wall and CPU time, seeds), swapping the folder in.

What it trains on: chat-rendered problems from `make_data.pretraining_stream`, which shares the
suite's arithmetic but none of its problems (the suite file on disk is the exclusion list),
asked only with the operator symbol ("What is 37 + 45?"). The loss covers only the assistant
turn (the answer digits and `<|im_end|>`), as SFT would.

Deliberately narrow: the model becomes good at symbolic questions and stays poor at the
questions in words that make up half the suite, so greedy pass@1 lands in the middle and the
loop has a real, learnable gap to close. `STEPS` is just past the point where the symbolic
arithmetic "clicks": with `DATA_SEED` the suite's symbolic half goes from 52% at 500 steps to
91% at 750 and 96% at 1000. That point depends on the data order: of the three orders tried,
this one clicks earliest (the two others were at 40% and 76% after 1000 steps), so it was
kept for the shortest build.

Determinism: fixed seeds for data, init and batch order, one thread (`THREADS`; a single
thread is also what keeps a shared 2-core machine responsive) and
`torch.use_deterministic_algorithms(True)`; two runs on the same machine and torch build give
bit-identical weights. A different CPU (other SIMD kernels) or torch version may differ in the
last bits, and so in a few greedy answers.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # sibling scripts, also when imported by the tests

import build_tokenizer as bt  # noqa: E402
import make_data as md  # noqa: E402

SEED = 1234
DATA_SEED = 999
THREADS = 1
BATCH = 64
STEPS = 750
LR = 3e-3
WARMUP = 100
TOKENIZER_TEXTS = 20_000
DIGIT_WEIGHTS = {1: 1.0, 2: 3.0}
"""Pretraining mix by digit count: 1-digit problems are few and learned early, so most of the
budget goes to the carries and borrows of 2-digit ones."""

ARCH: dict[str, Any] = {
    "hidden_size": 128,
    "intermediate_size": 512,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "max_position_embeddings": 128,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
}
"""Qwen2 shape: ~1.1 M parameters with a ~330-token vocabulary.

Input and output embeddings are untied. Tied, every token the model never reads (the words of
the questions in words) is pushed down as an output by every step, by Adam in one shared
direction, until those tokens are one indistinguishable vector that no LoRA adapter can tell
apart. Measured on this task: LoRA SFT lifted questions in words from 1% to 29% on the tied
model and from 4% to 65% on the untied one, with the same recipe budget."""


def set_determinism(seed: int = SEED) -> None:
    import torch

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.manual_seed(seed)
    torch.set_num_threads(THREADS)
    torch.use_deterministic_algorithms(True)
    torch.set_flush_denormal(True)  # tiny late-training gradients are slow as denormals


def suite_problems(suite_path: Path) -> set[md.Problem]:
    return {md.problem_of(item) for item in md.read_items(suite_path)}


def pretraining_problems(n: int, suite_path: Path) -> list[md.Problem]:
    """The exact problem sequence the model trains on (the tests check its disjointness)."""
    return list(md.pretraining_stream(n, DATA_SEED, suite_problems(suite_path), DIGIT_WEIGHTS))


def tokenizer_texts(problems: list[md.Problem]) -> list[str]:
    """The BPE training text: pretraining problems, every fourth one re-asked in words.

    A general-purpose tokenizer has seen ordinary words, so the wordings of `md.PHRASINGS`
    get tokens of their own although the model never trains on them.
    """
    texts = []
    for i, p in enumerate(problems):
        wording = 1 + i // 4 % (len(md.PHRASINGS[p.op]) - 1) if i % 4 == 3 else 0
        texts.append(bt.render_chat(p.phrased(wording).prompt, p.answer))
    return texts


def encode(tok, problems: list[md.Problem]) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded input ids and labels (-100 outside the assistant's answer)."""
    import torch

    prompts = tok([bt.render_chat(p.prompt) for p in problems], add_special_tokens=False)
    answers = tok([p.answer + bt.IM_END for p in problems], add_special_tokens=False)
    rows = [p + a for p, a in zip(prompts["input_ids"], answers["input_ids"], strict=True)]
    width = max(map(len, rows))
    ids = torch.full((len(rows), width), tok.pad_token_id, dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    for i, (p, a) in enumerate(zip(prompts["input_ids"], answers["input_ids"], strict=True)):
        ids[i, : len(p) + len(a)] = torch.tensor(p + a)
        labels[i, len(p) : len(p) + len(a)] = torch.tensor(a)
    return ids, labels


def make_model(vocab_size: int, eos_id: int, pad_id: int):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=vocab_size, bos_token_id=None, eos_token_id=eos_id, pad_token_id=pad_id, **ARCH
    )
    config._attn_implementation = "eager"  # sdpa's CPU kernels are not all deterministic
    return Qwen2ForCausalLM(config)


def lr_at(step: int) -> float:
    """Linear warmup, then inverse-square-root decay (Vaswani et al. 2017).

    Deliberately not cosine: this schedule does not depend on the total step count, so the
    model after k steps of a longer run is exactly the model a k-step build produces. That is
    how `STEPS` was chosen: one long run, snapshots measured, the first step count in range.
    """
    return LR * min((step + 1) / WARMUP, math.sqrt(WARMUP / max(step + 1, WARMUP)))


def train(
    model: Any,
    ids: torch.Tensor,
    labels: torch.Tensor,
    steps: int,
    on_step: Callable[[int, Any], None] | None = None,
) -> list[float]:
    """Plain AdamW loop over consecutive batches of the (already shuffled) stream.

    `on_step(steps_done, model)` is called after every step (used to snapshot a long run).
    """
    import torch
    from rich.progress import Progress

    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01, betas=(0.9, 0.98))
    losses: list[float] = []
    model.train()
    with Progress(transient=True) as progress:
        task = progress.add_task("training", total=steps)
        for step in range(steps):
            rows = slice(step * BATCH, (step + 1) * BATCH)
            x, y = ids[rows], labels[rows]
            used = int((x != 0).sum(1).max())  # trim the batch to its longest row
            out = model(input_ids=x[:, :used], attention_mask=(x[:, :used] != 0).long())
            logits = out.logits[:, :-1].float()
            loss = torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.size(-1)), y[:, 1:used].reshape(-1)
            )
            for group in opt.param_groups:
                group["lr"] = lr_at(step)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            losses.append(loss.item())
            progress.update(task, advance=1, description=f"training loss {loss.item():.3f}")
            if on_step is not None:
                on_step(step + 1, model)
    model.eval()
    return losses


def save(model, tok, out: Path, info: dict[str, object]) -> None:
    """Write the model folder next to `out`, then swap it in (file names stay stable)."""
    from transformers import GenerationConfig

    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tok.save_pretrained(tmp)
    eos = tok.convert_tokens_to_ids(bt.IM_END)
    GenerationConfig(
        eos_token_id=eos, pad_token_id=tok.pad_token_id, do_sample=False, max_new_tokens=8
    ).save_pretrained(tmp)
    (tmp / "build_info.json").write_text(json.dumps(info, indent=2) + "\n")
    old = out.with_name(out.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if out.exists():
        out.rename(old)
    tmp.rename(out)
    shutil.rmtree(old, ignore_errors=True)


def build(
    out: Path,
    steps: int = STEPS,
    suite_path: Path = HERE / "suite.jsonl",
    on_step: Callable[[int, Any], None] | None = None,
) -> dict[str, Any]:
    """Tokenizer, data, model, training, save; returns the build info written beside it."""
    import torch

    started = time.perf_counter()
    cpu_started = time.process_time()
    set_determinism()
    problems = pretraining_problems(steps * BATCH, suite_path)
    tok = bt.wrap(bt.train_tokenizer(tokenizer_texts(problems[:TOKENIZER_TEXTS])))
    bad = bt.round_trip_failures(tok, [bt.render_chat(p.prompt, p.answer) for p in problems[:500]])
    if bad:
        raise SystemExit(f"tokenizer does not round-trip, e.g. {bad[0]!r}")
    ids, labels = encode(tok, problems)
    eos = tok.convert_tokens_to_ids(bt.IM_END)
    model = make_model(len(tok), eos, tok.pad_token_id)
    losses = train(model, ids, labels, steps, on_step)
    info = {
        "steps": steps,
        "batch_size": BATCH,
        "learning_rate": LR,
        "warmup_steps": WARMUP,
        "seeds": {"torch": SEED, "data": DATA_SEED},
        "threads": THREADS,
        "pretraining_problems": len(problems),
        "parameters": sum(p.numel() for p in model.parameters()),
        "final_loss_mean_last_50": sum(losses[-50:]) / len(losses[-50:]),
        "torch": torch.__version__,
        "build_seconds": round(time.perf_counter() - started, 1),
        "build_cpu_seconds": round(time.process_time() - cpu_started, 1),
    }
    save(model, tok, out, info)
    return info


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--out", type=Path, default=HERE / "model")
    args = parser.parse_args(argv)
    info = build(args.out, args.steps)
    print(json.dumps(info, indent=2))


if __name__ == "__main__":
    main()
