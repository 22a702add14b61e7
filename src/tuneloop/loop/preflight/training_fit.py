"""Whether training fits: the plan `train:` makes, its estimate, and the settings that fit.

`training_plan` unpacks the section into `tuneloop.memory`'s plain numbers, as the trainers
will run it: rows per pass are `batch_size` (SFT), 2 × `batch_size` (DPO: chosen and
rejected in one pass) or `batch_size × grpo.group_size` (GRPO, composite), divided over
`train.nproc`; positions per row are the longest row's (`row_tokens.py`) capped at
`train.max_length` for SFT and DPO, the longest prompt plus `grpo.max_completion_length`
for GRPO; precision as `train.common.load_model` loads the base (a GPU: bfloat16 unless
`train.distributed.bf16: false`, NF4 with `load_in_4bit`; CPU: float32, bf16 autocast with
`bf16: true`); gradient checkpointing on unless `train.extra.gradient_checkpointing: false`
(TRL's configs default it on, whatever `train.distributed.gradient_checkpointing` says).
On CPU the `nproc` processes share the RAM, so the need is nproc × one process's.

`fixes` tries one setting at a time — `batch_size` and `max_length` (or the completion
length) halved until it fits, gradient checkpointing back on, `adapter: lora`, 4-bit on a
GPU, one process — and, when no setting fits alone, all of them at their strongest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuneloop.config import TrainConfig
from tuneloop.memory import (
    MemoryEstimate,
    ModelShape,
    Precision,
    TrainingPlan,
    gib,
    training_memory,
)
from tuneloop.train.strategy import bf16_on, installed

TRL_CHECKPOINTING = True
"""TRL's SFT, GRPO and DPO configs turn gradient checkpointing on by default (TRL 1.16)."""
GROUP_METHODS = frozenset({"grpo", "composite"})


@dataclass(frozen=True)
class Fix:
    key: str
    """The setting to change."""
    text: str
    """The change, as a user writes it: `train.batch_size 2`."""
    need: int
    """Bytes the plan needs with it."""

    def line(self) -> str:
        return f"{self.text} (~{gib(self.need)} GiB)"


def tokens_per_row(train: TrainConfig, longest: int | None) -> int:
    if train.method in GROUP_METHODS:
        return (longest or train.max_length) + train.grpo.max_completion_length
    return min(longest, train.max_length) if longest else train.max_length


def checkpointing(train: TrainConfig) -> bool:
    if "gradient_checkpointing" in train.extra:  # the TRL config's own key wins (common_args)
        return bool(train.extra["gradient_checkpointing"])
    return train.distributed.gradient_checkpointing or TRL_CHECKPOINTING


def precision(train: TrainConfig, gpu: bool) -> Precision:
    d = train.distributed
    if gpu:
        return "nf4" if d.load_in_4bit else "bf16" if bf16_on(train, gpu) else "fp32"
    return "autocast" if d.bf16 else "fp32"


def training_plan(train: TrainConfig, gpu: bool, longest: int | None) -> TrainingPlan:
    """What one training process of `train` holds (module docstring)."""
    per_batch = train.grpo.group_size if train.method in GROUP_METHODS else 1
    per_batch = 2 if train.method == "dpo" else per_batch
    rows = max(train.batch_size * per_batch // train.nproc, 1)
    full = train.adapter == "none"
    d = train.distributed
    kl = train.method == "dpo" or (train.method in GROUP_METHODS and train.grpo.beta > 0)
    stage = {"fsdp": 3, "deepspeed": d.deepspeed_stage}.get(d.strategy, 0)
    targets = train.lora.target_modules
    return TrainingPlan(
        rows=rows,
        tokens=tokens_per_row(train, longest),
        full=full,
        lora_rank=train.lora.r,
        lora_targets=() if targets == "all-linear" else tuple(targets),
        precision=precision(train, gpu),
        checkpointing=checkpointing(train),
        padded=rows > 1,
        reference=full and kl,
        shards=train.nproc if stage else 1,
        zero_stage=stage if train.nproc > 1 else 0,
        gpu=gpu,
    )


def processes(train: TrainConfig, gpu: bool) -> int:
    """Training processes that share one memory: all of them on CPU, one per GPU."""
    return 1 if gpu else train.nproc


def estimate(
    shape: ModelShape, train: TrainConfig, gpu: bool, longest: int | None
) -> MemoryEstimate:
    return training_memory(shape, training_plan(train, gpu, longest))


def need(shape: ModelShape, train: TrainConfig, gpu: bool, longest: int | None) -> int:
    """Bytes the machine must hold: one process's peak × the processes sharing its memory."""
    return estimate(shape, train, gpu, longest).peak * processes(train, gpu)


def describe(train: TrainConfig, gpu: bool, longest: int | None) -> str:
    """`sft, LoRA r16, float32 on CPU, 8 rows × 312 tokens, gradient checkpointing`."""
    plan = training_plan(train, gpu, longest)
    kind = f"LoRA r{plan.lora_rank}" if not plan.full else "full fine-tune"
    where = "GPU" if gpu else "CPU"
    dtype = "bf16 autocast" if plan.precision == "autocast" else plan.precision
    parts = [train.method, kind, f"{dtype} on {where}"]
    parts.append(f"{plan.rows} rows × {plan.tokens} tokens")
    parts.append("gradient checkpointing" if plan.checkpointing else "no gradient checkpointing")
    if processes(train, gpu) > 1:
        parts.append(f"× {train.nproc} processes")
    return ", ".join(parts)


Change = tuple[str, dict[str, Any]]
"""(the change as a user writes it, the update of the `train` section)."""


def fixes(
    shape: ModelShape, train: TrainConfig, gpu: bool, longest: int | None, capacity: int
) -> list[Fix]:
    """For each setting, the gentlest change of it that makes `train` fit `capacity`; when
    no single setting does, all of their strongest changes at once (one Fix, if that fits);
    else []."""
    groups = _changes(train, gpu)
    fitting = []
    for key, candidates in groups:
        for text, update in candidates:
            needed = need(shape, train.model_copy(update=update), gpu, longest)
            if needed <= capacity:
                fitting.append(Fix(key, text, needed))
                break
    if fitting or not groups:
        return fitting
    together: dict[str, Any] = {}
    for _, candidates in groups:
        together |= candidates[-1][1]
    needed = need(shape, train.model_copy(update=together), gpu, longest)
    if needed > capacity:
        return []
    text = ", ".join(candidates[-1][0] for _, candidates in groups)
    return [Fix(groups[0][0], f"all of {text}", needed)]


def _changes(train: TrainConfig, gpu: bool) -> list[tuple[str, list[Change]]]:
    """(key, its changes from gentlest to strongest) for every setting worth changing."""
    out: list[tuple[str, list[Change]]] = []
    batches: list[Change] = [
        (f"train.batch_size {b}", {"batch_size": b})
        for b in _halvings(train.batch_size, train.nproc)
    ]
    if batches:
        out.append(("train.batch_size", batches))
    lengths: list[Change]
    if train.method in GROUP_METHODS:
        lengths = [
            (
                f"train.grpo.max_completion_length {n}",
                {"grpo": train.grpo.model_copy(update={"max_completion_length": n})},
            )
            for n in _halvings(train.grpo.max_completion_length, 16)
        ]
        key = "train.grpo.max_completion_length"
    else:
        lengths = [
            (f"train.max_length {n} (longer rows truncated)", {"max_length": n})
            for n in _halvings(train.max_length, 64)
        ]
        key = "train.max_length"
    if lengths:
        out.append((key, lengths))
    if not checkpointing(train):
        extra = {k: v for k, v in train.extra.items() if k != "gradient_checkpointing"}
        text = "gradient checkpointing on (train.extra.gradient_checkpointing removed)"
        out.append(("train.extra", [(text, {"extra": extra})]))
    if train.adapter == "none":
        out.append(("train.adapter", [("train.adapter lora", {"adapter": "lora"})]))
    if gpu and not train.distributed.load_in_4bit and installed("bitsandbytes"):
        d = train.distributed.model_copy(update={"load_in_4bit": True})
        text = "train.distributed.load_in_4bit true (QLoRA)"
        out.append(
            ("train.distributed.load_in_4bit", [(text, {"distributed": d, "adapter": "lora"})])
        )
    if not gpu and train.nproc > 1:
        out.append(("train.nproc", [("train.nproc 1", {"nproc": 1})]))
    return out


def _halvings(value: int, floor: int) -> list[int]:
    """value // 2, value // 4, … down to `floor` (at least 1)."""
    out = []
    while value // 2 >= max(floor, 1):
        value //= 2
        out.append(value)
    return out
