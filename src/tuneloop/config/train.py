"""The training and merge sections of `loop.yaml` (`train:`, `merge:`).

`TrainConfig` is `train`'s `TrainSettings`; `LoraConfig`, `GrpoConfig` and `CompositeConfig` are
its `lora`, `grpo` and `composite` subsections. Same rules as every section: frozen, a
docstring under each field, and the CLI options and `docs/config.md` follow from them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from tuneloop.config.base import ConfigPath, Section
from tuneloop.config.diloco import DilocoConfig
from tuneloop.config.distributed import DistributedConfig
from tuneloop.config.health import CheckpointConfig, HealthConfig


class LoraConfig(Section):
    r: int = Field(default=16, gt=0)
    """LoRA rank."""
    alpha: float = Field(default=32.0, gt=0)
    """LoRA alpha (scaling = alpha / r)."""
    dropout: float = Field(default=0.0, ge=0, lt=1)
    """LoRA dropout."""
    target_modules: list[str] | Literal["all-linear"] = "all-linear"
    """Modules to adapt: a list of names (or one comma-separated string) or `all-linear`."""

    @field_validator("target_modules", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        if isinstance(value, str) and value != "all-linear":
            return [name.strip() for name in value.split(",") if name.strip()]
        return value


class GrpoConfig(Section):
    group_size: int = Field(default=8, ge=2)
    """Completions per prompt (the GRPO group)."""
    beta: float = Field(default=0.0, ge=0)
    """KL coefficient against the reference model."""
    loss_type: Literal["dr_grpo", "grpo", "bnpo", "dapo", "cispo", "gspo"] = "dr_grpo"
    """Objective, each TRL's own: `dr_grpo`, `grpo`, `bnpo`, `dapo`, `cispo` (TRL loss types;
    `cispo` with ε_max 5) or `gspo` (TRL's `grpo` loss with sequence-level importance
    sampling, Zheng et al. 2025)."""
    max_completion_length: int = Field(default=16, gt=0)
    """Completion length during training."""
    temperature: float = Field(default=1.0, gt=0)
    """Sampling temperature for the groups."""
    scorer: str | None = None
    """Reward scorer; None uses each prompt's scorer or the suite default."""


class CompositeConfig(Section):
    alpha: float = Field(default=0.0, ge=0)
    """Weight of on-policy self-distillation (the model with the hint as teacher); 0 = off."""
    beta: float = Field(default=0.0, ge=0)
    """Weight of replay-DPO on the preference pairs; 0 = off (then `pairs` is not read)."""
    pairs: ConfigPath | None = None
    """Preference pairs JSONL (`prompt`, `chosen`, `rejected`) for replay-DPO (when beta > 0);
    in the loop, None reads the replay phase's pairs (`replay/dpo.decontaminated.jsonl`)."""
    pairs_batch_size: int = Field(default=2, gt=0)
    """Preference pairs drawn per step for replay-DPO."""
    divergence: Literal["reverse_kl", "forward_kl", "jsd"] = "reverse_kl"
    """Self-distillation's divergence per completion token: `reverse_kl` KL(student ‖ teacher),
    `forward_kl` KL(teacher ‖ student), or `jsd`, GKD's generalised Jensen-Shannon divergence
    with `jsd_beta` (train/methods/divergence.py)."""
    jsd_beta: float = Field(default=0.5, ge=0, le=1)
    """`jsd` only: the teacher's weight in the mixture, in TRL's GKD convention (0 is forward
    KL, 1 reverse KL, 0.5 the symmetric JSD)."""
    top_k: int | None = Field(default=None, gt=0)
    """Compare only the teacher's top k tokens at each position, both sides renormalised over
    them (biased: the student's mass elsewhere goes unpunished); None = the full vocabulary."""
    hint_source: Literal["field", "replay", "scorer_feedback"] = "field"
    """The teacher's hint: `field` (each row's `hint_field`), `replay` (the teacher replay's
    passing answer to the same prompt, read from `hint_rows`; prompts no teacher passed are
    not distilled) or `scorer_feedback` (the scorer's verdict on the student's own failed
    sample, such as "wrong answer; extracted: 16; expected: 15"; passing samples are not
    distilled)."""
    hint_rows: ConfigPath | None = None
    """`hint_source: replay`: the replay's distillation rows (its `sft.jsonl`: each prompt with
    the teacher's passing answer), matched to the training prompts by their messages; in the
    loop, None reads the replay phase's (`replay/sft.decontaminated.jsonl`)."""
    hint_field: str = "answer"
    """`hint_source: field`: the row field with the teacher's privileged context (the reference
    answer or a hint)."""
    hint_template: str = "\n\n(Reference answer: {hint})"
    """The hint as the teacher reads it: `{hint}` is replaced by the hint."""
    hint_placement: Literal["append", "replace"] = "append"
    """`append`: the filled template is appended to the last user turn of the teacher's
    prompt; `replace`: it replaces that turn's text (a restatement of the question)."""
    teacher: Literal["current", "base"] = "current"
    """The teacher's weights: `current`, the model as it trains (adapter on: the target moves
    with the student); `base`, the frozen base model (adapter off: a fixed target)."""

    @model_validator(mode="after")
    def _hint_slot(self) -> CompositeConfig:
        # beta > 0 without `pairs` is checked where the pairs can come from: the loop's
        # preflight (the replay phase supplies them) and `tuneloop train` (train.composite)
        if "{hint}" not in self.hint_template:
            raise ValueError("train.composite.hint_template must contain {hint}")
        return self


class TrainConfig(Section):
    method: str = "grpo"
    """Training method: `grpo`, `composite`, `sft` or `dpo` (or a registered trainer plugin)."""
    data: ConfigPath | None = None
    """Training data JSONL; None means the data phase's corpus."""
    steps: int = Field(default=100, gt=0)
    """Optimizer steps (an upper bound when `max_seconds` is set)."""
    max_seconds: float | None = Field(default=None, gt=0)
    """Wall-clock budget for training, counted from the first optimizer step (model loading
    excluded): once spent, training stops after the step in flight and the adapter is kept;
    `train_settings.json` records `steps_done`, `train_seconds` and `stop`. None = no budget."""
    learning_rate: float = Field(default=5e-4, gt=0)
    """Peak learning rate."""
    batch_size: int = Field(default=8, gt=0)
    """Prompts (GRPO) or rows (SFT/DPO) per step."""
    seed: int = 0
    """Training seed."""
    nproc: int = Field(default=1, ge=1)
    """Processes for training (`train.distributed.launcher` starts them when more than one)."""
    distributed: DistributedConfig = DistributedConfig()
    """Launcher (torchrun, accelerate), strategy (DDP, FSDP, DeepSpeed) and memory options."""
    adapter: Literal["lora", "none"] = "lora"
    """`lora`: train a LoRA adapter (`train.lora`); `none`: full fine-tuning of every weight, and
    the merge phase takes the trained model as the merged one."""
    lora: LoraConfig = LoraConfig()
    grpo: GrpoConfig = GrpoConfig()
    composite: CompositeConfig = CompositeConfig()
    """`composite`: the GRPO objective + alpha · self-distillation + beta · replay-DPO."""
    sft_warmup_steps: int = Field(default=0, ge=0)
    """GRPO: SFT-on-references warm-up steps on the same adapter before GRPO (0 = none)."""
    sft_warmup_data: ConfigPath | None = None
    """GRPO: rows for the warm-up (SFT on their references, or chat rows as they are); None
    uses the GRPO prompts themselves. Prompts banded by the champion's pass rate are mostly
    ones it already half solves: a warm-up on a broader set teaches what GRPO cannot yet
    reward. In the loop it is matched against the suites like `train.data`."""
    sft_warmup_batch_size: int | None = Field(default=None, gt=0)
    """Rows per warm-up SFT step; None uses batch_size."""
    sft_warmup_learning_rate: float | None = Field(default=None, gt=0)
    """Warm-up SFT learning rate; None uses learning_rate."""
    torch_threads: int | None = Field(default=None, gt=0)
    """CPU threads for torch during training; None keeps torch's default (1 suits a shared box)."""
    dpo_beta: float = Field(default=0.1, gt=0)
    """DPO beta."""
    allow_contamination: bool = False
    """Train even if training prompts match suite items (recorded in the run)."""
    max_length: int = Field(default=512, gt=0)
    """SFT/DPO: longest tokenized row; longer rows are truncated."""
    warmup_ratio: float = Field(default=0.0, ge=0, lt=1)
    """Fraction of the steps spent warming the learning rate up."""
    lr_scheduler: str = "constant"
    """`constant` or any transformers scheduler name (`linear`, `cosine`)."""
    max_grad_norm: float = Field(default=1.0, gt=0)
    """Gradient clipping: largest global L2 norm of the gradients per step."""
    extra: dict[str, Any] = {}
    """Further keyword arguments passed verbatim to the TRL config (escape hatch)."""
    checkpoint: CheckpointConfig = CheckpointConfig()
    """Resumable checkpoints every N steps; a re-run resumes from the newest."""
    health: HealthConfig = HealthConfig()
    """Stop rules: a non-finite loss or gradient, a GRPO collapse."""
    diloco: DilocoConfig = DilocoConfig()
    """DiLoCo across replica processes (torchft): `replicas: 0` leaves it off."""


class MergeConfig(Section):
    zero_adapter: bool = False
    """Control arm: pass the base model through the merge path with no adapter."""
    min_change: float = Field(default=0.0, ge=0)
    """The merged weights must differ from the base by more than this (largest absolute
    difference over all tensors), or the merge fails: an adapter lost to rounding or never
    trained is not a new model. Not checked for the zero-adapter control."""
    agreement_items: int = Field(default=64, ge=0)
    """With `serve.challenger: adapter`: the doctor serves the merged model and the adapter on
    its base, each on the round's backend, and compares their greedy completions on this many
    suite items outside the gate slice (`doctor.json`'s `agreement`); 0 skips it."""
