"""The TRL arguments every method shares come from `TrainConfig`, one key each."""

from __future__ import annotations

from pathlib import Path

from tuneloop.config import TrainConfig
from tuneloop.train.common import common_args


def test_settings_reach_the_trl_arguments(tmp_path: Path) -> None:
    s = TrainConfig(
        learning_rate=0.01,
        lr_scheduler="cosine",
        max_grad_norm=0.5,
        seed=7,
        extra={"weight_decay": 0.1},
    )
    args = common_args(s, tmp_path, steps=3)
    assert args["max_steps"] == 3 and args["learning_rate"] == 0.01
    assert args["lr_scheduler_type"] == "cosine" and args["max_grad_norm"] == 0.5
    assert args["seed"] == args["data_seed"] == 7 and args["weight_decay"] == 0.1
