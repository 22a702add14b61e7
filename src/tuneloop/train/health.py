"""Training health: stop on a non-finite loss or gradient, warn on or abort a GRPO collapse.

`HealthCallback` watches every logged step (`train.health`; the signals are `signals.py`):

- a NaN/inf `loss` or `grad_norm` stops training with `PhaseFailed` naming the step. It is
  raised from `on_log`, which transformers calls *before* it saves that step's checkpoint, so
  the newest checkpoint left on disk is from before the bad step. As a second guard, a step
  about to be saved whose trainable weights are non-finite stops training the same way (that
  covers a `logging_steps` > 1 in `train.extra`, where a bad step may not be logged).
- a GRPO collapse (`signals.collapse_warning`: equal rewards at the floor, KL above its bound
  or entropy below its bound, for a whole window of logged steps) prints a warning once, or
  with `on_collapse: abort` stops training the same way, so the collapsed step's checkpoint
  is not saved either.

A stop also leaves `health_stop.json` in the run folder (`walkback.HealthStop`, main process
only): `run.train` reads it once the trainer has raised, in this process or from a torchrun
worker, and walks back to the newest healthy checkpoint (`walkback.py`,
`train.health.on_unhealthy`) or fails the phase as raised.

`fit` is what every trainer calls instead of `trainer.train()`: it adds the callback (and
budget.py's `BudgetCallback`, which enforces `train.max_seconds` and records steps done) and
resumes from the stage's newest checkpoint (`resume.py`), saying so on stderr. A stage
whose newest checkpoint is its last step (GRPO's warm-up when GRPO was killed, or a run killed
between its last save and the rename) only loads that checkpoint's adapter: transformers,
asked to resume from a final checkpoint, trains one step more.

Deliberately a stop is an error inside the trainer, not an early finish: the trainer publishes
nothing, and only `run.train`, which sees the whole run folder, decides what becomes of it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from tuneloop.config.health import HealthConfig
from tuneloop.errors import PhaseFailed
from tuneloop.train.budget import BudgetCallback
from tuneloop.train.metrics import MetricsCallback, metrics_row
from tuneloop.train.resume import checkpoint_step, kept_checkpoint, last_checkpoint, trim_metrics
from tuneloop.train.settings import TrainSettings
from tuneloop.train.signals import collapse_bounds, collapse_warning, nonfinite
from tuneloop.train.strategy import prepare
from tuneloop.train.walkback import HealthStop, write_stop


class HealthCallback(TrainerCallback):  # type: ignore[misc]
    """Enforce `train.health` on one training stage; `checkpoints` is its checkpoint folder,
    `run_dir` where a stop is recorded (`walkback.STOP_FILE`; None records none)."""

    def __init__(
        self, h: HealthConfig, *, phase: str, checkpoints: Path, run_dir: Path | None = None
    ) -> None:
        self.h = h
        self.phase = phase
        self.checkpoints = Path(checkpoints)
        self.run_dir = run_dir
        self._rows: list[dict[str, Any]] = []
        self._warned = False

    def _stop(self, what: str, state: Any) -> None:
        step = state.global_step
        reason = f"training ({self.phase}) stopped at step {step}: {what}"
        message = f"{reason}; {kept_checkpoint(self.checkpoints)}"
        if self.run_dir is not None and state.is_world_process_zero:
            stop = HealthStop(stage=self.phase, step=step, reason=reason, message=message)
            write_stop(self.run_dir, stop)
        raise PhaseFailed(message)

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
        if not logs or "train_runtime" in logs:
            return
        bad = nonfinite(logs)
        if bad:
            what = "non-finite " + ", ".join(bad)
            if self.h.on_nonfinite == "stop":
                self._stop(what + " (train.health.on_nonfinite: stop)", state)
            print(f"warning: {self.phase}: step {state.global_step}: {what}", file=sys.stderr)
        self._collapse(metrics_row(dict(logs), state.global_step, None, self.phase), state)

    def _collapse(self, row: dict[str, Any], state: Any) -> None:
        h = self.h
        self._rows = [*self._rows[-h.collapse_window :], row]
        message = collapse_warning(self._rows, h.collapse_window, **collapse_bounds(h))
        if message is None:
            return
        if h.on_collapse == "abort":
            self._stop(message + " (train.health.on_collapse: abort)", state)
        if not self._warned and state.is_world_process_zero:
            self._warned = True
            print(f"warning: {message}", file=sys.stderr, flush=True)

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        model = kw.get("model")
        if not control.should_save or model is None or self.h.on_nonfinite != "stop":
            return
        for name, p in model.named_parameters():
            if p.requires_grad and not bool(p.detach().isfinite().all()):
                self._stop(f"non-finite trainable weight {name}", state)


def is_main_process() -> bool:
    return os.environ.get("RANK", "0") == "0"


def fit(trainer: Any, s: TrainSettings, stage: str) -> Any:
    """`trainer.train()` under the health checks, resumed from the stage's newest checkpoint."""
    folder = Path(trainer.args.output_dir)
    run_dir = folder.parent.parent  # <run>/checkpoints/<stage>
    prepare(trainer)
    trainer.add_callback(HealthCallback(s.health, phase=stage, checkpoints=folder, run_dir=run_dir))
    trainer.add_callback(BudgetCallback(s.max_seconds, stage=stage, run_dir=run_dir))
    for callback in trainer.callback_handler.callbacks:
        if isinstance(callback, MetricsCallback):  # the bar shows the clock that ends it
            callback.budget_s = s.max_seconds
    resume = last_checkpoint(folder)
    step = (checkpoint_step(resume) or 0) if resume is not None else 0
    if resume is not None and is_main_process():
        trim_metrics(run_dir / "metrics.jsonl", stage, step)
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
