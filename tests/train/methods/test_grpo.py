"""GRPO learns: the reward rises on a toy task the tiny policy can learn in a few dozen steps.

The reward goes through the scorer registry, like the numeric scorer does in the demo; if the
rewards were computed on anything but the policy's own completions (the wrong model, stale
samples), the policy would get no consistent signal and the curve would stay flat.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tuneloop.plugins import Score
from tuneloop.registry import scorers
from tuneloop.train.run import train
from tuneloop.train.settings import TrainSettings


def _alnum_fraction(**_: Any) -> Any:
    def score(item: dict, completion: str) -> Score:
        return Score(sum(c.isalnum() for c in completion[:4]) / 4)

    return score


def test_reward_rises_on_a_learnable_reward(
    tiny_model: Path, prompts: Path, tmp_path: Path
) -> None:
    if "test_alnum" not in scorers:
        scorers.add("test_alnum", _alnum_fraction, origin="tests")
    settings = TrainSettings(
        method="grpo",
        steps=30,
        batch_size=2,
        grpo={"group_size": 8, "max_completion_length": 4, "scorer": "test_alnum"},
        lora={"r": 8, "alpha": 16},
        learning_rate=5e-2,
        seed=0,
    )
    out = train(tiny_model, prompts, tmp_path / "a", settings, progress=False)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    rewards = [r["reward_mean"] for r in rows]
    assert len(rewards) == 30
    first, last = sum(rewards[:5]) / 5, sum(rewards[-5:]) / 5
    assert last > first + 0.2, rewards
    assert {"reward_std", "frac_zero_spread", "learning_rate", "step_time_s"} <= set(rows[-1])


def test_the_objective_menu_names_trls_own_losses(tmp_path: Path) -> None:
    from tuneloop.train.methods.grpo import grpo_config

    def trl(loss: str) -> tuple[str, str]:
        args = grpo_config(TrainSettings(grpo={"loss_type": loss}, batch_size=1), tmp_path, 1)
        return args.loss_type, args.importance_sampling_level

    assert trl("dr_grpo") == ("dr_grpo", "token")  # the default
    assert TrainSettings().grpo.loss_type == "dr_grpo"
    assert trl("gspo") == ("grpo", "sequence")
    assert [trl(name)[0] for name in ("grpo", "bnpo", "dapo")] == ["grpo", "bnpo", "dapo"]


def test_cispo_clips_the_weight_at_its_own_epsilon(tmp_path: Path) -> None:
    from tuneloop.train.methods.grpo import CISPO_EPSILON_HIGH, grpo_config

    def config(loss: str) -> Any:
        return grpo_config(TrainSettings(grpo={"loss_type": loss}, batch_size=1), tmp_path, 1)

    assert (config("cispo").loss_type, config("cispo").epsilon_high) == ("cispo", 5.0)
    assert CISPO_EPSILON_HIGH == 5.0
    assert config("dapo").epsilon_high is None  # TRL then clips at ε both ways, as PPO does
