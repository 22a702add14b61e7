"""Training settings and the record saved beside the adapter.

`TrainSettings` is loop.yaml's `train:` section (`tuneloop.config.TrainConfig`, with its nested
`lora:` and `grpo:` sections): one definition used by the config, `tuneloop train`'s options
and the trainers. `TrainRunRecord` is written as
`train_settings.json` next to the adapter: the resolved settings plus what they were applied
to (data sha256, base model hash), whether suite contamination was allowed, and how training
ended (steps, seconds, a walk-back to a healthy checkpoint).
"""

from __future__ import annotations

from typing import Any

from tuneloop.config import TrainConfig
from tuneloop.records import Record
from tuneloop.records.train_health import WalkBack

TrainSettings = TrainConfig
"""Every knob of a training run: loop.yaml's `train:` section, as the phase takes it."""

WARMUP_ADAPTER = "warmup"
"""Where a GRPO or composite run keeps its SFT warm-up's adapter, inside its output folder (a
LoRA run only): what the warm-up alone learned, so that a round can evaluate each step."""


class TrainRunRecord(Record):
    """`train_settings.json`: what a training run did, to what, with which settings."""

    KIND = "train_settings"
    VERSION = 5
    """v2: `settings` is the nested `TrainConfig` (`lora.r`, `grpo.group_size`, …); v3 adds
    `steps_done`, `train_seconds` and `stop` (`train.max_seconds`); v4 the truncation counts
    (`truncated_rows`, `truncated_tokens`, `longest_row`; `lengths.jsonl` has each row's); v5
    `walk_back` (`train.health.on_unhealthy`), `stop: unhealthy`, `prompts_by_band` and
    `warmup_data_sha256`."""

    method: str
    """Training method (`grpo`, `sft`, `dpo` or a plugin name)."""
    settings: dict[str, Any]
    """The resolved `TrainSettings` (loop.yaml's `train:` section, every default filled in)."""
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
    warmup_data_sha256: str | None = None
    """sha256 of `train.sft_warmup_data` when a warm-up reads it (its path is in `settings`)."""
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
    """Wall-clock seconds of the training call (model loading included)."""
    steps_done: int | None = None
    """Optimizer steps the last stage completed (None: the trainer did not report them)."""
    train_seconds: float | None = None
    """Seconds from the first optimizer step to the end (what `train.max_seconds` counts)."""
    stop: str | None = None
    """Why training ended: `max_seconds` (the budget), `steps` (`train.steps` reached) or
    `unhealthy` (`train.health` stopped it; `walk_back` says what was published instead)."""
    truncated_rows: int | None = None
    """Rows longer than `train.max_length`, cut to it (None: a method that does not truncate,
    see `train/lengths.py`)."""
    truncated_tokens: int | None = None
    """Tokens those rows lost."""
    longest_row: int | None = None
    """The longest row's tokens, before truncation."""
    walk_back: WalkBack | None = None
    """Set when training ended unhealthy and a healthy checkpoint became the adapter
    (`train.health.on_unhealthy: walk_back`): which one, and why."""
    prompts_by_band: dict[str, int] = {}
    """GRPO prompts seen per difficulty band (the corpus's `band` field) up to the published
    adapter's step: metrics.jsonl's `band_<name>` columns summed; {} when the rows had none."""
