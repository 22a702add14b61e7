"""Training settings: the plain values a training run needs, and the record saved beside it.

`TrainSettings` mirrors `TrainConfig`/`GrpoConfig`/`LoraConfig` in loop.yaml as plain values
(the loop unpacks the config; phase code never sees it). `TrainRunRecord` is written as
`train_settings.json` next to the adapter: the resolved settings plus what they were applied
to (data sha256, base model hash) and whether suite contamination was allowed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from tuneloop.records import Record


@dataclass(frozen=True)
class TrainSettings:
    """Every knob of a training run, as plain values (defaults match loop.yaml's)."""

    steps: int = 100
    learning_rate: float = 5e-4
    batch_size: int = 8
    """Prompts (GRPO) or rows (SFT/DPO) per optimizer step, over all processes."""
    seed: int = 0
    lora_r: int = 16
    lora_alpha: float = 32.0
    lora_dropout: float = 0.0
    target_modules: tuple[str, ...] | str = "all-linear"
    group_size: int = 8
    beta: float = 0.0
    loss_type: str = "dr_grpo"
    max_completion_length: int = 16
    temperature: float = 1.0
    reward_scorer: str | None = None
    """GRPO reward scorer; None uses each row's `scorer` field or the default scorer."""
    sft_warmup_steps: int = 0
    """GRPO only: SFT-on-references steps on the same adapter before GRPO starts (0 = none)."""
    sft_warmup_batch_size: int | None = None
    """Rows per warm-up SFT step; None uses `batch_size`."""
    sft_warmup_learning_rate: float | None = None
    """Warm-up SFT learning rate; None uses `learning_rate`."""
    dpo_beta: float = 0.1
    max_length: int = 512
    """SFT/DPO: longest tokenized row; longer rows are truncated."""
    warmup_ratio: float = 0.0
    lr_scheduler: str = "constant"
    """`constant` or any transformers scheduler name (`linear`, `cosine`)."""
    torch_threads: int | None = None
    """CPU threads for torch; None keeps torch's default. 1 is much faster on a shared,
    oversubscribed machine (OpenMP threads spin while waiting for a core)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Further keyword arguments passed verbatim to the TRL config (escape hatch)."""

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if isinstance(self.target_modules, tuple):
            out["target_modules"] = list(self.target_modules)
        return out

    def lora_targets(self) -> list[str] | str:
        if isinstance(self.target_modules, str):
            return self.target_modules
        return list(self.target_modules)


class TrainRunRecord(Record):
    """`train_settings.json`: what a training run did, to what, with which settings."""

    KIND = "train_settings"
    VERSION = 1

    method: str
    """Training method (`grpo`, `sft`, `dpo` or a plugin name)."""
    settings: dict[str, Any]
    """The resolved `TrainSettings`."""
    base_model: str
    """Path of the base checkpoint."""
    base_model_sha256: str
    """sha256 over the base checkpoint's files (`sha256_tree`)."""
    data: str
    """Path of the training data JSONL."""
    data_sha256: str
    """sha256 of the training data file."""
    data_rows: int
    """Rows used for training."""
    allow_contamination: bool
    """True when training was allowed despite prompts matching suite items."""
    contaminated_rows: list[str] = []
    """`file:line ~ suite item id` for every training row that matched a suite item."""
    suite_paths: list[str] = []
    """Suites checked for contamination."""
    nproc: int = 1
    """Processes used (torchrun --nproc_per_node)."""
    versions: dict[str, str] = {}
    """Library versions (torch, transformers, trl, peft)."""
    seconds: float = 0.0
    """Wall-clock seconds of training."""
