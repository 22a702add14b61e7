"""Walk back, do not just stop: after an unhealthy end, publish the newest healthy checkpoint.

Training ends unhealthy when `health.HealthCallback` stops it (a non-finite loss or gradient,
a non-finite weight about to be saved, a collapse under `on_collapse: abort`; it leaves
`health_stop.json` in the run folder) or when it finishes with its reward down by more than
`train.health.reward_drop` (`signals.reward_drop`). With `train.health.on_unhealthy:
walk_back` (the default) `run.train` then calls `walk_back`, which takes the checkpoints of the
method's stage newest first and publishes the first that passes every check:

1. the training log (metrics.jsonl) up to its step has no non-finite `loss`/`grad_norm` (when
   `on_nonfinite` is `stop`);
2. it was saved before the first collapse began (`signals.collapse_onset`: the first step of
   the first window in which a collapse signal held throughout), so a checkpoint saved inside
   the window that later fired is passed over, although the window was not full yet;
3. its reward — the mean over the `collapse_window` logged steps up to it — is not below the
   start's by more than `reward_drop` (when set);
4. its weights (the adapter's, or the whole model's under `train.adapter: none`) are finite.

No eval score is read: the choice uses only what training itself logged and saved, so the
gate's slice stays unseen by it. The checkpoint's adapter (or model) and tokenizer files are
copied into the run folder, where the merge phase reads the trained adapter, and the choice
is recorded as `TrainRunRecord.walk_back` (`records/train_health.py`). When no checkpoint
passes, or with `on_unhealthy: fail`, the phase fails (exit 3) as it always did, keeping the
checkpoints. Deliberately, only the method's own stage is walked back: a stop in GRPO's SFT
warm-up fails, since a warm-up checkpoint is not what the run was asked to train.

`walk_back_problems` are the configuration warnings (`tuneloop check`, `tuneloop train`):
checkpoints too sparse for a walk-back to reach past a collapse window, or none at all where
the config asks for an unhealthy end to be possible.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuneloop.config.health import HealthConfig
from tuneloop.errors import PhaseFailed
from tuneloop.records import Record, read_record_if_exists, write_record
from tuneloop.records.train_health import WalkBack
from tuneloop.records.train_metrics import METRICS_FILE, read_train_metrics
from tuneloop.train.resume import checkpoint_step, kept_checkpoint, stage_dir
from tuneloop.train.settings import TrainSettings
from tuneloop.train.signals import (
    collapse_bounds,
    collapse_onset,
    nonfinite,
    reward_at,
    reward_drop,
    reward_start,
    rewarded,
)

STOP_FILE = "health_stop.json"

TRAINING_STATE = ("optimizer.pt", "scheduler.pt", "scaler.pt", "trainer_state.json")
"""Checkpoint files that resume training and are no part of the trained adapter (with
`rng_state*.pth`); the rest is what `save_model` writes at the end of a run."""


class HealthStop(Record):
    """`<run>/health_stop.json`: the stop `HealthCallback` raised, for `run.train` to read
    (under torchrun the stop happens in a worker process)."""

    KIND = "train_health_stop"

    stage: str
    """The training stage that was stopped."""
    step: int
    """The optimizer step it stopped at (its checkpoint was not saved)."""
    reason: str
    """`training (<stage>) stopped at step N: <what>`."""
    message: str
    """The whole error, as raised (the reason and where the newest checkpoint is)."""


def write_stop(run_dir: Path, stop: HealthStop) -> None:
    write_record(Path(run_dir) / STOP_FILE, stop)


def read_stop(run_dir: Path) -> HealthStop | None:
    return read_record_if_exists(Path(run_dir) / STOP_FILE, HealthStop)


def forget_stop(run_dir: Path) -> None:
    """Drop a stop left by an earlier segment of this run (a resumed run trains again)."""
    (Path(run_dir) / STOP_FILE).unlink(missing_ok=True)


def walks_back(stop: HealthStop, s: TrainSettings) -> bool:
    """Pure: whether `stop` is walked back (else it fails the phase as raised)."""
    return stop.stage == s.method and s.health.on_unhealthy == "walk_back"


# ---- the core: which checkpoint, from the log and the weights -------------------------------


@dataclass(frozen=True)
class Check:
    """One health check of a checkpoint, in words."""

    words: str
    passed: bool


@dataclass(frozen=True)
class Choice:
    """The checkpoint to walk back to (step None: none passes), and the newer ones passed over."""

    step: int | None
    checks: list[str]
    """The checks the chosen checkpoint passed."""
    skipped: list[str]
    """`checkpoint-N: the check it failed` for each newer checkpoint."""


def log_checks(step: int, rows: Sequence[Mapping[str, Any]], h: HealthConfig) -> list[Check]:
    """Pure: the training log's checks of a checkpoint saved at `step` (`rows`: the stage's
    metrics rows, the whole run, since a collapse is seen only once its window is full)."""
    upto = [r for r in rows if r["step"] <= step]
    out = []
    if h.on_nonfinite == "stop":
        bad = next(((r["step"], nonfinite(r)) for r in upto if nonfinite(r)), None)
        words = f"no non-finite loss or grad_norm through step {step}"
        if bad is not None:
            words = f"non-finite {', '.join(bad[1])} at step {bad[0]}"
        out.append(Check(words, bad is None))
    if not rewarded(rows):
        return out
    onset = collapse_onset(rows, h.collapse_window, **collapse_bounds(h))
    if onset is None:
        out.append(Check("no collapse in the log", True))
    elif step < onset:
        out.append(Check(f"saved before the collapse that began at step {onset}", True))
    else:
        out.append(Check(f"inside the collapse that began at step {onset}", False))
    start = reward_start(rows, h.collapse_window)
    at = reward_at(rows, step, h.collapse_window)
    if h.reward_drop is not None and start is not None and at is not None:
        floor = start - h.reward_drop
        sign = "≥" if at >= floor else "<"
        words = f"reward {at:.3g} {sign} start {start:.3g} − reward_drop {h.reward_drop:g}"
        out.append(Check(words, at >= floor))
    return out


def choose_checkpoint(
    steps: Sequence[int],
    rows: Sequence[Mapping[str, Any]],
    h: HealthConfig,
    weights_problem: Callable[[int], str | None],
) -> Choice:
    """Pure given `weights_problem` (step → why its weights fail, or None): the newest
    checkpoint that passes every check. The weights are read only for a checkpoint whose log
    checks pass (a whole model is large)."""
    skipped: list[str] = []
    for step in sorted(steps, reverse=True):
        checks = log_checks(step, rows, h)
        failed = [c.words for c in checks if not c.passed]
        if not failed:
            problem = weights_problem(step)
            if problem is None:
                return Choice(step, [*(c.words for c in checks), "finite weights"], skipped)
            failed = [problem]
        skipped.append(f"checkpoint-{step}: {'; '.join(failed)}")
    return Choice(None, [], skipped)


# ---- the shell: read the run folder, copy the checkpoint, say so -----------------------------


def weights_problem(checkpoint: Path) -> str | None:
    """Why `checkpoint`'s trained weights cannot be published (a non-finite tensor, none
    saved), or None."""
    import torch
    from safetensors import safe_open

    adapter = checkpoint / "adapter_model.safetensors"
    files = [adapter] if adapter.is_file() else sorted(checkpoint.glob("model*.safetensors"))
    if not files:
        return "no adapter_model.safetensors or model*.safetensors in it"
    for path in files:
        with safe_open(str(path), framework="pt") as tensors:
            for name in tensors.keys():  # noqa: SIM118  (safe_open is not a dict)
                if not bool(torch.isfinite(tensors.get_tensor(name)).all()):
                    return f"non-finite weight {name}"
    return None


def stage_rows(work: Path, stage: str) -> list[dict[str, Any]]:
    """The stage's metrics.jsonl rows as plain mappings (what `signals.py` reads)."""
    path = work / METRICS_FILE
    if not path.is_file():
        return []
    return [
        {"step": r.step, "phase": r.phase, **r.values()}
        for r in read_train_metrics(path)
        if r.phase == stage
    ]


def checkpoints(work: Path, stage: str) -> dict[int, Path]:
    """The stage's complete checkpoints by step."""
    folder = stage_dir(work, stage)
    if not folder.is_dir():
        return {}
    return {
        step: p
        for p in folder.iterdir()
        if (step := checkpoint_step(p)) is not None and (p / "trainer_state.json").is_file()
    }


def publish(checkpoint: Path, work: Path) -> None:
    """Copy the checkpoint's adapter (or model) and tokenizer files into `work`, over the
    adapter training may have saved there."""
    for f in checkpoint.iterdir():
        state = f.name in TRAINING_STATE or f.name.startswith("rng_state")
        if f.is_file() and not state:
            shutil.copy2(f, work / f.name)


def walk_back(work: Path, s: TrainSettings, stop: HealthStop | None) -> WalkBack | None:
    """After training into `work`: None when it ended healthy; else the `WalkBack` to the
    newest healthy checkpoint, whose files are now the trained output. PhaseFailed when
    `on_unhealthy` is `fail` or no checkpoint passes. `stop` is the health stop that ended
    training (`walks_back(stop, s)` already true), None when it finished."""
    h, stage = s.health, s.method
    rows = stage_rows(work, stage)
    if stop is not None:
        reason, ended, failure = stop.reason, stop.step, stop.message
    else:
        drop = reward_drop(rows, h.collapse_window, h.reward_drop) if h.reward_drop else None
        if drop is None:
            return None
        ended = int(rows[-1]["step"])
        reason = f"training ({stage}) ended at step {ended} unhealthy: {drop}"
        failure = f"{reason}; {kept_checkpoint(stage_dir(work, stage))}"
        if h.on_unhealthy == "fail":
            raise PhaseFailed(f"{failure} (train.health.on_unhealthy: fail)")
    found = checkpoints(work, stage)
    choice = choose_checkpoint(
        [step for step in found if step <= ended], rows, h, lambda n: weights_problem(found[n])
    )
    if choice.step is None:
        none = "; ".join(choice.skipped) or "none was saved (train.checkpoint.every)"
        raise PhaseFailed(
            f"{failure}; no checkpoint passes the health checks to walk back to: {none}"
        )
    publish(found[choice.step], work)
    forget_stop(work)  # what it said is in the record now
    walked = WalkBack(
        stage=stage,
        checkpoint=found[choice.step].name,
        step=choice.step,
        steps=s.steps,
        ended_step=ended,
        reason=reason,
        checks=choice.checks,
        skipped=choice.skipped,
    )
    print(f"train: {walked.line()}; it passed: {', '.join(walked.checks)}", file=sys.stderr)
    return walked


def walk_back_problems(s: TrainSettings) -> list[tuple[str, str]]:
    """Pure: (config key, warning) for a walk-back the checkpoints cannot serve: none kept
    where the config makes an unhealthy end likely, or too few to reach past a collapse."""
    h, c = s.health, s.checkpoint
    if h.on_unhealthy != "walk_back":
        return []
    asked = "on_collapse: abort" if h.on_collapse == "abort" else None
    if h.reward_drop is not None:
        asked = "reward_drop"
    if c.every == 0 and asked is not None:
        return [
            (
                "train.checkpoint.every",
                f"0 keeps no checkpoint, so an unhealthy end (train.health.{asked}) has "
                "nothing to walk back to and fails the phase; set it > 0",
            )
        ]
    reach = (c.keep - 1) * c.every
    if c.every and h.on_collapse == "abort" and reach < h.collapse_window - 1:
        return [
            (
                "train.checkpoint.keep",
                f"{c.keep} checkpoint(s) every {c.every} steps reach back {reach} steps, less "
                f"than a collapse window ({h.collapse_window} steps): a collapse abort may "
                "find no checkpoint from before it began; raise keep or every",
            )
        ]
    return []
