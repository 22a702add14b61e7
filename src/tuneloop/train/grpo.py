"""GRPO with LoRA on TRL's `GRPOTrainer`, rewarded by the registered eval scorers.

Run: `tuneloop train --method grpo --base MODEL --data prompts.jsonl --out DIR`.
Defaults deviate from TRL's on purpose: loss `dr_grpo` (Liu et al. 2025, "Understanding R1-Zero-
Like Training": no length or std normalisation bias) and beta 0 (no reference model, as in
DAPO / Dr. GRPO), which halves memory and time on small models. `batch_size` counts *prompts*
per step; TRL's per-device batch counts completions, so it is batch_size × group_size / nproc.
With `sft_warmup_steps > 0` the same LoRA adapter is first trained by SFT on the references
(see sft.py), then GRPO continues from it: a tiny base model that never answers correctly
yields groups with zero reward spread and so no GRPO signal at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuneloop.train.common import (
    common_args,
    load_model,
    load_tokenizer,
    lora_config,
    per_device,
    without_printer,
)
from tuneloop.train.data import Row, grpo_rows, sft_rows
from tuneloop.train.metrics import MetricsCallback
from tuneloop.train.rewards import scorer_reward
from tuneloop.train.settings import TrainSettings


def grpo_config(s: TrainSettings, out_dir: Path, nproc: int) -> Any:
    from trl import GRPOConfig

    completions = per_device(s.batch_size * s.grpo.group_size, nproc, "batch_size × group_size")
    return GRPOConfig(
        **common_args(s, out_dir, s.steps),
        per_device_train_batch_size=completions,
        num_generations=s.grpo.group_size,
        max_completion_length=s.grpo.max_completion_length,
        temperature=s.grpo.temperature,
        beta=s.grpo.beta,
        loss_type=s.grpo.loss_type,
        log_completions=False,
    )


def build_grpo_trainer(
    model: Any, tokenizer: Any, rows: list[dict[str, Any]], s: TrainSettings, **kw: Any
) -> Any:
    """A configured GRPOTrainer (kw: out_dir, nproc, default_scorer, callbacks, peft)."""
    from datasets import Dataset
    from trl import GRPOTrainer

    return without_printer(
        GRPOTrainer(
            model=model,
            reward_funcs=[scorer_reward(s.grpo.scorer, kw["default_scorer"])],
            args=grpo_config(s, kw["out_dir"], kw["nproc"]),
            train_dataset=Dataset.from_list(rows),
            processing_class=tokenizer,
            callbacks=kw.get("callbacks") or [],
            peft_config=lora_config(s) if kw.get("peft", True) else None,
        )
    )


def train_grpo(base: Path, rows: list[Row], out_dir: Path, s: TrainSettings, **kw: Any) -> Any:
    """Train a LoRA adapter with GRPO (after an optional SFT warm-up); return the trainer."""
    from tuneloop.train.sft import build_sft_trainer

    tokenizer = load_tokenizer(base)
    model: Any = load_model(base)
    metrics = Path(out_dir) / "metrics.jsonl"
    progress = kw.get("progress", True)
    peft = True
    if s.sft_warmup_steps > 0:
        warm_settings = s.model_copy(
            update={
                "batch_size": s.sft_warmup_batch_size or s.batch_size,
                "learning_rate": s.sft_warmup_learning_rate or s.learning_rate,
            }
        )
        warm = build_sft_trainer(
            model,
            tokenizer,
            sft_rows(rows),
            warm_settings,
            out_dir=out_dir,
            nproc=kw.get("nproc", 1),
            steps=s.sft_warmup_steps,
            callbacks=[MetricsCallback(metrics, phase="sft_warmup", progress=progress)],
        )
        warm.train()
        model, peft = warm.model, False
    trainer = build_grpo_trainer(
        model,
        tokenizer,
        grpo_rows(rows),
        s,
        out_dir=out_dir,
        nproc=kw.get("nproc", 1),
        default_scorer=kw.get("default_scorer", "numeric"),
        peft=peft,
        callbacks=[MetricsCallback(metrics, phase="grpo", progress=progress)],
    )
    trainer.train()
    return trainer
