"""Training telemetry: `metrics.jsonl` (one fsynced row per logged step) and a rich bar.

TRL/transformers log under their own names; each row carries our names for the quantities the
loop and report.html read and keeps every other numeric value under its original key. Ours:
`loss`, `learning_rate`, `step_time_s`, and for GRPO (TRL 1.16's `GRPOTrainer` names in
`RENAMES`) `reward_mean`, `reward_std`, `frac_zero_spread` — the fraction of groups whose
rewards were all equal and so carry no learning signal — `kl` (logged only with `grpo.beta` >
0), `entropy` (mean token entropy of the completions), `clip_ratio` (the share of tokens whose
probability ratio was clipped: TRL's `clip_ratio/region_mean`, or `cispo_clip_ratio`; the
low/high parts keep TRL's keys) and `completion_length` (mean tokens per completion).
`band_<name>` are the prompts of each difficulty band the step's groups were drawn from
(counted by the reward function, `methods/rewards.py`). Only the main process writes and
draws, so a torchrun job has one log and one bar. What counts as unhealthy in these rows:
`signals.py`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from tuneloop.records import append_jsonl

RENAMES = {
    "reward": "reward_mean",
    "reward_std": "reward_std",
    "frac_reward_zero_std": "frac_zero_spread",
    "kl": "kl",
    "entropy": "entropy",
    "clip_ratio/region_mean": "clip_ratio",
    "cispo_clip_ratio": "clip_ratio",
    "completions/mean_length": "completion_length",
    "loss": "loss",
    "learning_rate": "learning_rate",
}
"""TRL's log key → ours (the rest keep TRL's)."""


def metrics_row(logs: dict[str, Any], step: int, step_time: float | None, phase: str) -> dict:
    """Pure: the metrics.jsonl row for one `on_log` call."""
    row: dict[str, Any] = {"step": step, "phase": phase}
    for key, value in logs.items():
        if not isinstance(value, int | float):
            continue
        row[RENAMES.get(key, key)] = float(value)
    if step_time is not None:
        row["step_time_s"] = step_time
    return row


class MetricsCallback(TrainerCallback):  # type: ignore[misc]
    """Append metrics rows to `path` and drive a rich progress bar (main process only)."""

    def __init__(self, path: Path, *, phase: str = "train", progress: bool = True) -> None:
        self.path = Path(path)
        self.phase = phase
        self.progress_enabled = progress
        self._progress: Any = None
        self._task: Any = None
        self._t0: float | None = None
        self._times: list[float] = []
        self.budget_s: float | None = None
        """`train.max_seconds` (set by `health.fit`): the clock, not the step count, then ends
        training, so the bar shows the steps done and the time spent, not a remaining time
        computed from `train.steps`, which is only an upper bound."""

    def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if not (state.is_world_process_zero and self.progress_enabled):
            return
        from rich.progress import (
            BarColumn,
            Progress,
            ProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        clock: ProgressColumn
        if self.budget_s is None:
            count, clock, total = (
                "{task.completed}/{task.total}",
                TimeRemainingColumn(),
                state.max_steps,
            )
        else:
            count = f"{{task.completed}} of ≤ {state.max_steps} steps, budget {self.budget_s:g} s,"
            clock, total = TimeElapsedColumn(), None
        self._progress = Progress(
            TextColumn(f"[bold]{self.phase}"),
            BarColumn(),
            TextColumn(count + " {task.fields[info]}"),
            clock,
            transient=False,
        )
        self._task = self._progress.add_task(self.phase, total=total, info="")
        self._progress.start()

    def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self._t0 = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self._t0 is not None:
            self._times.append(time.perf_counter() - self._t0)
        if self._progress is not None:
            self._progress.update(self._task, completed=state.global_step)

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
        if not state.is_world_process_zero or not logs or "train_runtime" in logs:
            return
        step_time = sum(self._times) / len(self._times) if self._times else None
        self._times = []
        row = metrics_row(dict(logs), state.global_step, step_time, self.phase)
        append_jsonl(self.path, [row])
        if self._progress is not None:
            info = " ".join(f"{k}={row[k]:.3g}" for k in ("loss", "reward_mean") if k in row)
            self._progress.update(self._task, info=info)

    def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
