"""Run state: the per-phase records, `state.json`, and the one-run-per-workdir lock.

Every write is atomic (temp file, fsync, rename), so a run killed at any instant leaves a
state that the next run can read. The lock is an `fcntl.flock` on `<workdir>/.lock`, which
the kernel releases when the holder dies, so a SIGKILLed run never leaves a stale lock; the
holder's pid is written inside so that a refused second run can name it.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Literal

from pydantic import BaseModel

from tuneloop.errors import InputError
from tuneloop.loop.layout import RunLayout
from tuneloop.pidlock import hold_pid_lock
from tuneloop.records import Record, read_record, write_record

PhaseStatus = Literal["running", "done", "failed", "skipped"]


class PhaseRecord(Record):
    """What one phase did: written into its folder as `phase.json` and kept in the state."""

    KIND = "phase"
    VERSION = 1

    phase: str
    """Phase name."""
    status: PhaseStatus
    """running, done (outputs verified), failed, or skipped (disabled in config)."""
    fingerprint: str
    """sha256 of the phase's config subset, its inputs' hashes and the code version."""
    inputs: dict[str, str] = {}
    """Input artifact name → sha256."""
    outputs: dict[str, str] = {}
    """Output path (relative to the workdir) → sha256."""
    started_at: str | None = None
    ended_at: str | None = None
    duration_s: float | None = None
    """Wall time inside the phase's work."""
    error: str | None = None
    """Why it failed, and which log to read."""
    notes: dict[str, object] = {}
    """Phase-specific facts (RSS before/after, skip reasons, server pid…)."""


class SupersededRun(BaseModel):
    """A round of this workdir that a changed re-run replaced (its outputs are quarantined)."""

    run_id: str
    """The replaced round's run id."""
    superseded_at: str
    """When the new round started."""
    reason: str
    """Which finished phases were redone, and why."""


class RunState(Record):
    KIND = "run_state"
    VERSION = 1

    run_id: str
    """The current round: stable across crash resumes; a re-run that redoes a finished phase
    (changed config or inputs, --from/--only, outputs that no longer verify) starts a new
    round with a new run id, so that no verdict, archive or record of the old one is reused
    or overwritten."""
    config_path: str
    created_at: str
    phases: dict[str, PhaseRecord] = {}
    previous_runs: list[SupersededRun] = []
    """Earlier rounds of this workdir, oldest first."""


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def load_state(workdir: Path) -> RunState | None:
    path = RunLayout(workdir).state
    return read_record(path, RunState) if path.exists() else None


def save_state(workdir: Path, state: RunState) -> None:
    write_record(RunLayout(workdir).state, state)


class WorkdirLock:
    """Exclusive lock on a workdir; refuses (InputError) naming the holder's pid."""

    def __init__(self, workdir: Path) -> None:
        self.path = RunLayout(workdir).lock
        self._fh: IO[str] | None = None

    def __enter__(self) -> WorkdirLock:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fh = self.path.open("a+")
        except OSError as err:
            reason = err.strerror or type(err).__name__
            raise InputError(
                f"workdir {self.path.parent}: cannot create or write it ({reason}: "
                f"{err.filename}); set `workdir:` in the config to a writable folder"
            ) from None
        hold_pid_lock(
            fh,
            lambda holder: (
                f"{self.path.parent}: another tuneloop run holds this workdir "
                f"(pid {holder}); wait for it or use another workdir"
            ),
        )
        self._fh = fh
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


Action = Literal["run", "skip", "redo", "off"]


class PlanLine(BaseModel):
    phase: str
    action: Action
    reason: str
