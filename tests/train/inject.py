"""Faults to inject into a real training run (a diverged weight, a scripted GRPO reward), and
a callback that keeps what each checkpoint saved."""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from tuneloop.plugins import Score
from tuneloop.registry import scorers


class Poison(TrainerCallback):  # type: ignore[misc]
    """Turn one trainable weight to NaN as optimizer step `step` begins (a diverged update)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if state.global_step + 1 == self.step:
            import torch

            weight = next(p for p in kw["model"].parameters() if p.requires_grad)
            with torch.no_grad():
                weight.fill_(math.nan)


class Script:
    """The reward of the n-th completion scored (0-based), whatever the completion says."""

    def __init__(self, reward: Callable[[int], float]) -> None:
        self.reward = reward
        self.calls = 0

    def __call__(self) -> float:
        value = self.reward(self.calls)
        self.calls += 1
        return value


SCRIPT = Script(lambda n: 0.0)
"""The script `scripted` rewards by; a test sets its own (`use_script`)."""


def use_script(reward: Callable[[int], float]) -> str:
    """Reward GRPO completions by `reward(n)`; returns the scorer's name for `grpo.scorer`."""
    global SCRIPT
    SCRIPT = Script(reward)
    if "test_scripted" not in scorers:

        def factory(**_: Any) -> Any:
            return lambda item, completion: Score(SCRIPT())

        scorers.add("test_scripted", factory, origin="tests")
    return "test_scripted"


class KeepCopies(TrainerCallback):  # type: ignore[misc]
    """Copy `name` out of each checkpoint as it is saved into `into/checkpoint-N/` (publishing
    a run deletes its checkpoints)."""

    def __init__(self, into: Path, name: str = "adapter_model.safetensors") -> None:
        self.into = into
        self.name = name

    def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        src = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        (self.into / src.name).mkdir(parents=True)
        shutil.copy2(src / self.name, self.into / src.name / self.name)
