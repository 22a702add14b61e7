"""GRPO with LoRA on TRL's `GRPOTrainer`, rewarded by the registered eval scorers.

Run: `tuneloop train --method grpo --base MODEL --data prompts.jsonl --out DIR`.
Defaults deviate from TRL's on purpose: loss `dr_grpo` (Liu et al. 2025, "Understanding R1-Zero-
Like Training": no length or std normalisation bias) and beta 0 (no reference model, as in
DAPO / Dr. GRPO), which halves memory and time on small models. `batch_size` counts *prompts*
per step; TRL's per-device batch counts completions, so it is batch_size × group_size / nproc.
With `sft_warmup_steps > 0` the same LoRA adapter is first trained by SFT on the references
(see sft.py) — of the GRPO prompts, or of `sft_warmup_data` —, then GRPO continues from it:
a tiny base model that never answers correctly yields groups with zero reward spread and so no
GRPO signal at all. The warm-up's own adapter is kept in `<out>/warmup/` (LoRA runs), so that the
loop can evaluate what each step added (`eval_warmup`).

The objective menu (`grpo.loss_type`) only names TRL's own losses (`cispo`: Khatri et al. 2025,
"The Art of Scaling RL Compute", clipped importance weights as a stop-gradient coefficient,
with its ε_max of 5): `gspo` is TRL's `grpo` loss
with `importance_sampling_level="sequence"` (Zheng et al. 2025, GSPO). With one update per
generation (TRL's default `num_iterations=1`) every ratio is 1 and GSPO's gradient equals
`grpo`'s; they part once samples are reused (`extra: {num_iterations: 2}`).

Rows that offer `tools` (agent items) roll out through TRL's own tool loop, their calls answered
by the item's environment and the tool results masked from the loss (see toolenv.py).
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
from tuneloop.train.data import Row, grpo_rows, read_rows, sft_rows
from tuneloop.train.health import fit
from tuneloop.train.methods.rewards import scorer_reward
from tuneloop.train.methods.sft import build_sft_trainer
from tuneloop.train.methods.toolenv import check_template, with_environments
from tuneloop.train.metrics import MetricsCallback
from tuneloop.train.settings import WARMUP_ADAPTER, TrainSettings

OBJECTIVES = {
    "grpo": ("grpo", "token"),
    "dr_grpo": ("dr_grpo", "token"),
    "dapo": ("dapo", "token"),
    "bnpo": ("bnpo", "token"),
    "gspo": ("grpo", "sequence"),
    "cispo": ("cispo", "token"),
}
"""`grpo.loss_type` → TRL's (`loss_type`, `importance_sampling_level`)."""
CISPO_EPSILON_HIGH = 5.0
"""CISPO's upper clip on the importance weight (ε_max), the ScaleRL paper's value (Khatri et
al. 2025) and TRL's documented recommendation; TRL's default (ε = 0.2) is PPO's."""


def grpo_config(s: TrainSettings, out_dir: Path, nproc: int, stage: str = "grpo") -> Any:
    from trl import GRPOConfig

    completions = per_device(s.batch_size * s.grpo.group_size, nproc, "batch_size × group_size")
    loss_type, level = OBJECTIVES[s.grpo.loss_type]
    return GRPOConfig(
        **common_args(s, out_dir, s.steps, stage),
        per_device_train_batch_size=completions,
        num_generations=s.grpo.group_size,
        max_completion_length=s.grpo.max_completion_length,
        temperature=s.grpo.temperature,
        beta=s.grpo.beta,
        loss_type=loss_type,
        importance_sampling_level=level,
        log_completions=False,
        epsilon_high=CISPO_EPSILON_HIGH if loss_type == "cispo" else None,
    )


def grpo_trainer_args(
    model: Any, tokenizer: Any, rows: list[dict[str, Any]], s: TrainSettings, **kw: Any
) -> dict[str, Any]:
    """GRPOTrainer's keyword arguments (kw: out_dir, nproc, default_scorer, callbacks, peft,
    stage: the checkpoint folder's name, default `grpo`)."""
    from datasets import Dataset

    rows, environments = with_environments(rows)
    if environments:
        check_template(tokenizer)
    return {
        "model": model,
        "reward_funcs": [scorer_reward(s.grpo.scorer, kw["default_scorer"])],
        "args": grpo_config(s, kw["out_dir"], kw["nproc"], kw.get("stage", "grpo")),
        "train_dataset": Dataset.from_list(rows),
        "processing_class": tokenizer,
        "callbacks": kw.get("callbacks") or [],
        "peft_config": lora_config(s) if kw.get("peft", True) else None,
        **({"environment_factory": environments} if environments else {}),
    }


def build_grpo_trainer(
    model: Any, tokenizer: Any, rows: list[dict[str, Any]], s: TrainSettings, **kw: Any
) -> Any:
    """A configured GRPOTrainer (kw: out_dir, nproc, default_scorer, callbacks, peft)."""
    from trl import GRPOTrainer

    return without_printer(GRPOTrainer(**grpo_trainer_args(model, tokenizer, rows, s, **kw)))


def warm_started(base: Path, rows: list[Row], out_dir: Path, s: TrainSettings, **kw: Any) -> Any:
    """(model, tokenizer, peft): the base, or the base after the SFT warm-up (peft False then:
    the model already carries the adapter GRPO continues)."""
    tokenizer = load_tokenizer(base)
    model: Any = load_model(base, s)
    if s.sft_warmup_steps <= 0:
        return model, tokenizer, True
    warm_settings = s.model_copy(
        update={
            "batch_size": s.sft_warmup_batch_size or s.batch_size,
            "learning_rate": s.sft_warmup_learning_rate or s.learning_rate,
        }
    )
    warm_rows = read_rows(s.sft_warmup_data) if s.sft_warmup_data is not None else rows
    warm = build_sft_trainer(
        model,
        tokenizer,
        sft_rows(warm_rows),
        warm_settings,
        out_dir=out_dir,
        nproc=kw.get("nproc", 1),
        steps=s.sft_warmup_steps,
        stage="sft_warmup",
        callbacks=[
            MetricsCallback(
                Path(out_dir) / "metrics.jsonl",
                phase="sft_warmup",
                progress=kw.get("progress", True),
            )
        ],
    )
    fit(warm, s, "sft_warmup")
    if s.adapter == "lora":  # what the warm-up alone learned (a round evaluates each step)
        warm.save_model(str(Path(out_dir) / WARMUP_ADAPTER))
    return warm.model, tokenizer, False


def train_grpo(base: Path, rows: list[Row], out_dir: Path, s: TrainSettings, **kw: Any) -> Any:
    """Train a LoRA adapter with GRPO (after an optional SFT warm-up); return the trainer."""
    model, tokenizer, peft = warm_started(base, rows, out_dir, s, **kw)
    trainer = build_grpo_trainer(
        model,
        tokenizer,
        grpo_rows(rows),
        s,
        out_dir=out_dir,
        nproc=kw.get("nproc", 1),
        default_scorer=kw.get("default_scorer", "numeric"),
        peft=peft,
        callbacks=[
            MetricsCallback(
                Path(out_dir) / "metrics.jsonl", phase="grpo", progress=kw.get("progress", True)
            )
        ],
    )
    return fit(trainer, s, "grpo")
