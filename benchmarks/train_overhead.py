"""Benchmark: tuneloop's GRPO step time against bare TRL `GRPOTrainer`, same run.

Run: `python benchmarks/train_overhead.py [--model examples/arith/model] [--steps 12]
[--rounds 2] [--threads 1]`.
Both arms train the same model with the same LoRA config, data, seed and
GRPOConfig; the tuneloop arm goes through `tuneloop.train.methods.build_grpo_trainer`
(scorer rewards from the registry, metrics.jsonl writer, rich bar off) and the peer arm is a
hand-written `GRPOTrainer` with a plain Python reward doing the same numeric check. Arms
alternate (ABAB…) to spread machine noise; the first 2 steps of each run are warm-up and
dropped. Prints the median step time of each arm and their ratio (goal ≤ 1.05).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from tuneloop.train.common import load_model, load_tokenizer, lora_config, quiet
from tuneloop.train.data import grpo_rows, read_rows
from tuneloop.train.methods import build_grpo_trainer, grpo_config
from tuneloop.train.metrics import MetricsCallback
from tuneloop.train.settings import TrainSettings

WARMUP = 2


class StepTimer(TrainerCallback):  # type: ignore[misc]
    def __init__(self) -> None:
        self.times: list[float] = []
        self._t0 = 0.0

    def on_step_begin(self, *a: Any, **k: Any) -> None:
        self._t0 = time.perf_counter()

    def on_step_end(self, *a: Any, **k: Any) -> None:
        self.times.append(time.perf_counter() - self._t0)


def bare_trl(model_dir: Path, rows: list[dict], s: TrainSettings, out: Path) -> list[float]:
    """The peer: GRPOTrainer as a TRL user would write it."""
    import json

    from datasets import Dataset
    from trl import GRPOTrainer

    def reward(completions: list, item: list[str], **_: Any) -> list[float]:
        out = []
        for c, raw in zip(completions, item, strict=True):
            text = c[0]["content"] if isinstance(c, list) else c
            out.append(1.0 if text.strip() == str(json.loads(raw)["answer"]) else 0.0)
        return out

    timer = StepTimer()
    trainer = GRPOTrainer(
        model=load_model(model_dir),
        reward_funcs=[reward],
        args=grpo_config(s, out, 1),
        train_dataset=Dataset.from_list(rows),
        processing_class=load_tokenizer(model_dir),
        peft_config=lora_config(s),
        callbacks=[timer],
    )
    trainer.train()
    return timer.times[WARMUP:]


def tuneloop_arm(model_dir: Path, rows: list[dict], s: TrainSettings, out: Path) -> list[float]:
    timer = StepTimer()
    trainer = build_grpo_trainer(
        load_model(model_dir),
        load_tokenizer(model_dir),
        rows,
        s,
        out_dir=out,
        nproc=1,
        default_scorer="numeric",
        callbacks=[MetricsCallback(out / "metrics.jsonl", progress=False), timer],
    )
    trainer.train()
    return timer.times[WARMUP:]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", type=Path, default=Path("examples/arith/model"))
    ap.add_argument("--data", type=Path, default=Path("examples/arith/train_prompts.jsonl"))
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (1: shared box)")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    quiet()
    rows = grpo_rows(read_rows(args.data))[:256]
    s = TrainSettings(
        steps=args.steps,
        batch_size=4,
        grpo={"group_size": 8, "max_completion_length": 8},
        learning_rate=1e-3,
        lora={"r": 16, "alpha": 32},
    )
    times: dict[str, list[float]] = {"tuneloop": [], "trl": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for name, fn in (("tuneloop", tuneloop_arm), ("trl", bare_trl)):
                out = Path(tmp) / f"{name}{r}"
                out.mkdir()
                times[name] += fn(args.model, rows, s, out)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"steps per arm: {len(times['trl'])} (after {WARMUP} warm-up steps per run)")
    print(
        f"median step time: tuneloop {med['tuneloop'] * 1000:.1f} ms, "
        f"bare TRL {med['trl'] * 1000:.1f} ms"
    )
    print(f"ratio tuneloop / TRL: {med['tuneloop'] / med['trl']:.3f} (goal ≤ 1.05)")


if __name__ == "__main__":
    main()
