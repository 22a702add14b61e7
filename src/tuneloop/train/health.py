"""Training health: stop on a non-finite loss or gradient, warn on or abort a GRPO collapse.

`HealthCallback` watches every logged step (`train.health`):

- a NaN/inf `loss` or `grad_norm` stops training with `PhaseFailed` naming the step. It is
  raised from `on_log`, which transformers calls *before* it saves that step's checkpoint, so
  the newest checkpoint left on disk is the last healthy one. As a second guard, a step about to
  be saved whose trainable weights are non-finite stops training the same way (that covers a
  `logging_steps` > 1 in `train.extra`, where a bad step may not be logged).
- a GRPO collapse (`metrics.collapse_warning`: equal rewards at the floor, KL above its bound
  or entropy below its bound, for a whole window of logged steps) prints a warning once, or
  with `on_collapse: abort` stops training the same way.

`fit` is what every trainer calls instead of `trainer.train()`: it adds the callback (and
budget.py's `BudgetCallback`, which enforces `train.max_seconds` and records steps done) and
resumes from the stage's newest checkpoint (`resume.py`), saying so on stderr. A stage
whose newest checkpoint is its last step (GRPO's warm-up when GRPO was killed, or a run killed
between its last save and the rename) only loads that checkpoint's adapter: transformers,
asked to resume from a final checkpoint, trains one step more.

Deliberately a stop is an error, not an early finish: no adapter is published, the loop fails
closed at the train phase, and the kept checkpoint is there to inspect or resume.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from tuneloop.config.health import HealthConfig
from tuneloop.errors import PhaseFailed
from tuneloop.train.budget import BudgetCallback
from tuneloop.train.metrics import collapse_warning, metrics_row
from tuneloop.train.resume import checkpoint_step, last_checkpoint, trim_metrics
from tuneloop.train.settings import TrainSettings
from tuneloop.train.strategy import prepare

WATCHED = ("loss", "grad_norm")
"""Logged values that must be finite."""


def nonfinite(logs: Mapping[str, Any]) -> list[str]:
    """Pure: `key=value` for each watched value in `logs` that is NaN or infinite."""
    return [
        f"{k}={logs[k]}"
        for k in WATCHED
        if isinstance(logs.get(k), int | float) and not math.isfinite(logs[k])
    ]


def kept_checkpoint(folder: Path) -> str:
    """Where the last healthy checkpoint is, in words for an error message."""
    last = last_checkpoint(folder)
    if last is None:
        return "no checkpoint was saved (set train.checkpoint.every to keep one)"
    return f"the last healthy checkpoint is {last}"


class HealthCallback(TrainerCallback):  # type: ignore[misc]
    """Enforce `train.health` on one training stage; `checkpoints` is its checkpoint folder."""

    def __init__(self, h: HealthConfig, *, phase: str, checkpoints: Path) -> None:
        self.h = h
        self.phase = phase
        self.checkpoints = Path(checkpoints)
        self._rows: list[dict[str, Any]] = []
        self._warned = False

    def _stop(self, what: str, step: int) -> None:
        raise PhaseFailed(
            f"training ({self.phase}) stopped at step {step}: {what}; "
            f"{kept_checkpoint(self.checkpoints)}"
        )

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
        if not logs or "train_runtime" in logs:
            return
        bad = nonfinite(logs)
        if bad:
            what = "non-finite " + ", ".join(bad)
            if self.h.on_nonfinite == "stop":
                self._stop(what + " (train.health.on_nonfinite: stop)", state.global_step)
            print(f"warning: {self.phase}: step {state.global_step}: {what}", file=sys.stderr)
        self._collapse(metrics_row(dict(logs), state.global_step, None, self.phase), state)

    def _collapse(self, row: dict[str, Any], state: Any) -> None:
        h = self.h
        self._rows = [*self._rows[-h.collapse_window :], row]
        message = collapse_warning(
            self._rows,
            h.collapse_window,
            zero_std_fraction=h.zero_std_fraction,
            reward_floor=h.reward_floor,
            max_kl=h.max_kl,
            min_entropy=h.min_entropy,
        )
        if message is None:
            return
        if h.on_collapse == "abort":
            self._stop(message + " (train.health.on_collapse: abort)", state.global_step)
        if not self._warned and state.is_world_process_zero:
            self._warned = True
            print(f"warning: {message}", file=sys.stderr, flush=True)

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        model = kw.get("model")
        if not control.should_save or model is None or self.h.on_nonfinite != "stop":
            return
        for name, p in model.named_parameters():
            if p.requires_grad and not bool(p.detach().isfinite().all()):
                self._stop(f"non-finite trainable weight {name}", state.global_step)


def is_main_process() -> bool:
    return os.environ.get("RANK", "0") == "0"


def fit(trainer: Any, s: TrainSettings, stage: str) -> Any:
    """`trainer.train()` under the health checks, resumed from the stage's newest checkpoint."""
    folder = Path(trainer.args.output_dir)
    prepare(trainer)
    trainer.add_callback(HealthCallback(s.health, phase=stage, checkpoints=folder))
    trainer.add_callback(BudgetCallback(s.max_seconds, stage=stage, run_dir=folder.parent.parent))
    resume = last_checkpoint(folder)
    step = (checkpoint_step(resume) or 0) if resume is not None else 0
    if resume is not None and is_main_process():
        trim_metrics(folder.parent.parent / "metrics.jsonl", stage, step)
        print(
            f"{stage}: resuming from {resume} (step {step} of {trainer.args.max_steps}; "
            "optimizer, scheduler and RNG state restored)",
            file=sys.stderr,
            flush=True,
        )
    if resume is not None and step >= trainer.args.max_steps:
        # transformers would train one step more from a final checkpoint; load it instead
        restore_adapter(trainer.model, resume)
        return trainer
    trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    return trainer


def restore_adapter(model: Any, checkpoint: Path) -> None:
    """Load a checkpoint's LoRA weights into `model` (a PEFT model) in place; for full
    fine-tuning (no adapter file) the checkpoint's whole model."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    if not (checkpoint / "adapter_model.safetensors").is_file():
        # tied weights (lm_head) are saved once, hence strict=False
        model.load_state_dict(load_file(str(checkpoint / "model.safetensors")), strict=False)
        return
    set_peft_model_state_dict(model, load_file(str(checkpoint / "adapter_model.safetensors")))
