"""Built-in trainers, registered by name in `tuneloop.registry.trainers`.

A trainer is a callable `(base, rows, out_dir, settings, *, nproc, default_scorer, progress)`
that trains and leaves a PEFT adapter (or, with `train.adapter: none`, the whole model) and
metrics.jsonl in `out_dir`. Plugins register the
same shape under the `tuneloop.trainers` entry-point group.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuneloop.registry import trainers
from tuneloop.train.data import Row
from tuneloop.train.settings import TrainSettings


def _save(trainer: Any, out_dir: Path) -> None:
    from tuneloop.train.strategy import save_trained

    save_trained(trainer, out_dir)


@trainers.register("grpo")
def grpo(base: Path, rows: list[Row], out_dir: Path, s: TrainSettings, **kw: Any) -> None:
    from tuneloop.train.grpo import train_grpo

    _save(train_grpo(base, rows, out_dir, s, **kw), out_dir)


@trainers.register("composite")
def composite(base: Path, rows: list[Row], out_dir: Path, s: TrainSettings, **kw: Any) -> None:
    from tuneloop.train.composite import train_composite

    _save(train_composite(base, rows, out_dir, s, **kw), out_dir)


@trainers.register("sft")
def sft(base: Path, rows: list[Row], out_dir: Path, s: TrainSettings, **kw: Any) -> None:
    from tuneloop.train.sft import train_sft

    _save(train_sft(base, rows, out_dir, s, **kw), out_dir)


@trainers.register("dpo")
def dpo(base: Path, rows: list[Row], out_dir: Path, s: TrainSettings, **kw: Any) -> None:
    from tuneloop.train.dpo import train_dpo

    _save(train_dpo(base, rows, out_dir, s, **kw), out_dir)
