"""`train.max_seconds`: a wall-clock budget for training, and what each run actually did.

`BudgetCallback` (a transformers `TrainerCallback`, attached by `health.fit` to every TRL
trainer: sft, dpo, grpo with its SFT warm-up, composite) starts its clock at the first
optimizer step, so model loading, dataset tokenization and trainer construction are not
counted, and after each step sets `control.should_training_stop` once `max_seconds` are spent:
the step in flight finishes, and the run ends normally (adapter saved, published) with fewer
steps than `train.steps`, which becomes an upper bound. The clock is shared by the stages of
one run in one process (GRPO's warm-up and GRPO), so the budget covers both. Under torchrun
the ranks agree by an all-reduce of the stop flag, so none waits on a collective another left.

Whatever the budget, each stage writes what it did to `<out>/budget.json` (steps done, seconds
from its first step to its end, and `stop`: `max_seconds` or `steps`); `run.train` copies it
into `train_settings.json` (`steps_done`, `train_seconds`, `stop`). Why: a comparison "at equal
training seconds" (examples/arith/measure_replay.py) needs the seconds counted the same way for
every method, and the record must say when a run stopped on the clock rather than its steps.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict
from transformers import TrainerCallback

from tuneloop.records import Record, read_record_if_exists, write_record

BUDGET_FILE = "budget.json"

_STARTED: dict[str, float] = {}
"""Clock start per run folder (resolved path) in this process: shared by a run's stages."""


class StageBudget(BaseModel):
    """What one training stage did against `train.max_seconds`."""

    model_config = ConfigDict(extra="forbid")

    stage: str
    """Trainer stage (`sft`, `sft_warmup`, `grpo`, `dpo`, `composite`)."""
    steps_planned: int
    """`max_steps` the stage was given (`train.steps`, or the warm-up's)."""
    steps_done: int
    """Optimizer steps completed when the stage ended (global step, a resume included)."""
    seconds: float
    """Seconds from the run's first optimizer step to this stage's end (loading excluded)."""
    stop: str
    """`max_seconds` when the budget ended it, else `steps`."""


class RunBudget(Record):
    """`<out>/budget.json`: the stages of one training run, in order."""

    KIND = "train_budget"

    max_seconds: float | None = None
    """`train.max_seconds` (None: no budget)."""
    stages: list[StageBudget] = []
    """Each stage's outcome; the last one is the run's."""


def _agree(stop: bool) -> bool:
    """Under torch.distributed: stop when any rank says stop (ranks must stop together)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return stop
    import torch

    flag = torch.tensor([1.0 if stop else 0.0])
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item() > 0)


class BudgetCallback(TrainerCallback):  # type: ignore[misc]
    """Stop one stage once `max_seconds` (None: never) are spent; record it in `run_dir`."""

    def __init__(self, max_seconds: float | None, *, stage: str, run_dir: Path) -> None:
        self.max_seconds = max_seconds
        self.stage = stage
        self.run_dir = Path(run_dir)
        self.key = str(self.run_dir.resolve())
        self.stopped = False

    def elapsed(self) -> float:
        start = _STARTED.get(self.key)
        return 0.0 if start is None else time.perf_counter() - start

    def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        _STARTED.setdefault(self.key, time.perf_counter())

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self.max_seconds is None:
            return
        if _agree(self.elapsed() >= self.max_seconds):
            self.stopped = True
            control.should_training_stop = True

    def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if not state.is_world_process_zero:
            return
        path = self.run_dir / BUDGET_FILE
        old = read_record_if_exists(path, RunBudget) or RunBudget(max_seconds=self.max_seconds)
        stage = StageBudget(
            stage=self.stage,
            steps_planned=int(args.max_steps),
            steps_done=int(state.global_step),
            seconds=round(self.elapsed(), 3),
            stop="max_seconds" if self.stopped else "steps",
        )
        kept = [s for s in old.stages if s.stage != self.stage]
        write_record(path, old.model_copy(update={"stages": [*kept, stage]}))


def run_outcome(run_dir: Path) -> dict[str, Any]:
    """`steps_done`, `train_seconds` and `stop` of a finished run (its last stage); {} when the
    trainer wrote no budget file (a plugin trainer, DiLoCo)."""
    budget = read_record_if_exists(Path(run_dir) / BUDGET_FILE, RunBudget)
    if budget is None or not budget.stages:
        return {}
    last = budget.stages[-1]
    return {"steps_done": last.steps_done, "train_seconds": last.seconds, "stop": last.stop}


def forget_clock(run_dir: Path) -> None:
    """Drop this process's clock for `run_dir` (a finished run; the next one starts afresh)."""
    _STARTED.pop(str(Path(run_dir).resolve()), None)
