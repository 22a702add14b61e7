"""Benchmark: GRPO rollouts per second — completions generated per second of generation while
tuneloop's GRPO trains — with in-process generation (transformers `generate`, what
`train.method: grpo` uses), and with TRL's vLLM generation (`use_vllm`, server mode) where
this machine can run it.

Run: `python benchmarks/grpo_rollouts.py [--model examples/arith/model] [--steps 8]
[--batch-size 4] [--group-size 8] [--max-completion-length 16] [--threads 2]`.

The trainer is the loop's own (`tuneloop.train.methods.build_grpo_trainer`, the demo's LoRA
and scorer reward). Its generation call (`GRPOTrainer._generate_single_turn`) is timed on the
instance and its completions counted; the first step is warm-up and dropped. Prints the median
rollouts/s and generated tokens/s over the steps, and the share of step time generation took.

The vLLM arm builds the same trainer with `use_vllm=True, vllm_mode="server"` against a
`trl vllm-serve` endpoint. TRL's client needs the `vllm` package importable in the training
environment (its weight sync uses vLLM's NCCL communicator, CUDA only), and vLLM lives in its
own environment here (`.venv-vllm`, `transformers<5.20`): on a CPU machine the default
`--peer vllm` exits 2 before measuring, saying so, and `--peer none` measures the in-process
rollouts alone.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from peers import missing, refuse  # benchmarks/ is on sys.path when run
from transformers import TrainerCallback

from tuneloop.config import TrainConfig
from tuneloop.train.common import load_model, load_tokenizer, quiet
from tuneloop.train.data import grpo_rows, read_rows
from tuneloop.train.methods import build_grpo_trainer
from tuneloop.train.methods.grpo import grpo_trainer_args

WARMUP = 1


class Steps(TrainerCallback):  # type: ignore[misc]
    """Step wall times, and per step the generation time, completions and tokens."""

    def __init__(self) -> None:
        self.rows: list[dict[str, float]] = []
        self.current: dict[str, float] = {}
        self._t0 = 0.0

    def on_step_begin(self, *a: Any, **k: Any) -> None:
        self.current = {"gen_s": 0.0, "completions": 0, "tokens": 0}
        self._t0 = time.perf_counter()

    def on_step_end(self, *a: Any, **k: Any) -> None:
        self.rows.append({**self.current, "step_s": time.perf_counter() - self._t0})


def timed_generation(trainer: Any, steps: Steps) -> None:
    """Wrap the trainer's generation call: time it and count what it returned."""
    generate = trainer._generate_single_turn

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        out = generate(*args, **kwargs)
        completion_ids = out[0]  # (completion_ids, logprobs)
        steps.current["gen_s"] += time.perf_counter() - t0
        steps.current["completions"] += len(completion_ids)
        steps.current["tokens"] += sum(len(c) for c in completion_ids)
        return out

    trainer._generate_single_turn = wrapper


def settings(args: argparse.Namespace) -> TrainConfig:
    return TrainConfig.model_validate(
        {
            "method": "grpo",
            "steps": args.steps + WARMUP,
            "batch_size": args.batch_size,
            "learning_rate": 1e-3,
            "grpo": {
                "group_size": args.group_size,
                "max_completion_length": args.max_completion_length,
            },
        }
    )


def loaded(model_dir: Path, s: TrainConfig, out: Path) -> tuple[Any, Any, dict[str, Any]]:
    """(model, tokenizer, the loop trainer's keyword arguments): what both arms build from."""
    kw = {"out_dir": out, "nproc": 1, "default_scorer": "numeric"}
    return load_model(model_dir, s), load_tokenizer(model_dir), kw


def in_process(model_dir: Path, rows: list[dict[str, Any]], s: TrainConfig, out: Path) -> Steps:
    from tuneloop.train.metrics import MetricsCallback

    steps = Steps()
    model, tokenizer, kw = loaded(model_dir, s, out)
    callbacks = [MetricsCallback(out / "metrics.jsonl", progress=False), steps]
    trainer = build_grpo_trainer(model, tokenizer, rows, s, callbacks=callbacks, **kw)
    timed_generation(trainer, steps)
    trainer.train()
    return steps


def vllm_arm(model_dir: Path, rows: list[dict[str, Any]], s: TrainConfig, out: Path) -> str:
    """Build the same trainer on TRL's vLLM server mode; what TRL says when it cannot."""
    from trl import GRPOTrainer

    model, tokenizer, kw = loaded(model_dir, s, out)
    args = grpo_trainer_args(model, tokenizer, rows, s, **kw)
    args["args"].use_vllm, args["args"].vllm_mode = True, "server"
    try:
        GRPOTrainer(**args)
    except Exception as err:  # the figure this arm can give: TRL's own refusal
        return f"unavailable: {type(err).__name__}: {err}"
    return "constructed (a `trl vllm-serve` endpoint would be needed to measure it)"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", type=Path, default=Path("examples/arith/model"))
    ap.add_argument("--data", type=Path, default=Path("examples/arith/train_prompts.jsonl"))
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--max-completion-length", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    ap.add_argument("--peer", choices=["vllm", "none"], default="vllm")
    args = ap.parse_args()
    import torch

    if args.peer == "vllm" and (missing("vllm") or not torch.cuda.is_available()):
        refuse(
            "TRL's vLLM server mode needs `vllm` importable beside TRL (here it lives in "
            ".venv-vllm, pinned to transformers<5.20) and a CUDA GPU for its weight sync",
            how="a CUDA machine whose training environment has vllm; `--peer none` measures "
            "tuneloop's in-process rollouts alone",
        )

    torch.set_num_threads(args.threads)
    quiet()
    rows = grpo_rows(read_rows(args.data))[:512]
    s = settings(args)
    with tempfile.TemporaryDirectory() as tmp:
        steps = in_process(args.model, rows, s, Path(tmp) / "in-process")
        vllm = vllm_arm(args.model, rows, s, Path(tmp) / "vllm") if args.peer == "vllm" else None
    kept = steps.rows[WARMUP:]
    rollouts = statistics.median(r["completions"] / r["gen_s"] for r in kept)
    tokens = statistics.median(r["tokens"] / r["gen_s"] for r in kept)
    share = statistics.median(r["gen_s"] / r["step_s"] for r in kept)
    per_step = int(statistics.median(r["completions"] for r in kept))
    print(
        f"model {args.model}, {len(kept)} steps (after {WARMUP} warm-up), {per_step} "
        f"completions per step ({args.batch_size} prompts × {args.group_size}), "
        f"max {args.max_completion_length} tokens, {args.threads} threads"
    )
    print(
        f"in-process generation: {rollouts:.1f} rollouts/s, {tokens:.1f} generated tokens/s "
        f"(medians); generation is {100 * share:.0f}% of the step time"
    )
    if vllm is not None:
        print(f"TRL vLLM server mode: {vllm}")
        print("ratio vLLM / in-process: n/a (the arm is built, not yet timed)")


if __name__ == "__main__":
    main()
