"""Built-in trainers, registered by name in `tuneloop.registry.trainers`.

A trainer is a callable `(base, rows, out_dir, settings, *, nproc, default_scorer, progress)`
that trains and leaves a PEFT adapter (or, with `train.adapter: none`, the whole model) and
metrics.jsonl in `out_dir`. Plugins register the
same shape under the `tuneloop.trainers` entry-point group. Each one imports its method's
module when it is called: those load torch, transformers and TRL, and registering (which
`tuneloop check` does to know the method names) must not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuneloop.registry import trainers
from tuneloop.train.data import Row
from tuneloop.train.settings import TrainSettings
from tuneloop.train.strategy import save_trained


@trainers.register("grpo")
def grpo(base: Path, rows: list[Row], out_dir: Path, s: TrainSettings, **kw: Any) -> None:
    from tuneloop.train.methods.grpo import train_grpo

    save_trained(train_grpo(base, rows, out_dir, s, **kw), out_dir)


@trainers.register("composite")
def composite(base: Path, rows: list[Row], out_dir: Path, s: TrainSettings, **kw: Any) -> None:
    from tuneloop.train.methods.composite import train_composite

    save_trained(train_composite(base, rows, out_dir, s, **kw), out_dir)


@trainers.register("sft")
def sft(base: Path, rows: list[Row], out_dir: Path, s: TrainSettings, **kw: Any) -> None:
    from tuneloop.train.methods.sft import train_sft

    save_trained(train_sft(base, rows, out_dir, s, **kw), out_dir)


@trainers.register("dpo")
def dpo(base: Path, rows: list[Row], out_dir: Path, s: TrainSettings, **kw: Any) -> None:
    from tuneloop.train.methods.dpo import train_dpo

    save_trained(train_dpo(base, rows, out_dir, s, **kw), out_dir)
