"""The watcher's round values: where it looks (`Site`), a step's result, a round's cost and exit."""

from __future__ import annotations

import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tuneloop.errors import EXIT_INTERRUPTED, EXIT_TERMINATED
from tuneloop.flywheel.prospect import NextRound
from tuneloop.flywheel.status import LastRound
from tuneloop.flywheel.watch.state import CostEstimate, RoundRow, RoundStatus, RoundTrigger
from tuneloop.suite import SuiteItem


@dataclass(frozen=True)
class Work:
    """What one round spends, from the config (for the estimate a person approves)."""

    eval_items: int
    n_samples: int
    train_steps: int


@dataclass(frozen=True)
class Site:
    """Where the watcher looks and what it runs, unpacked from loop.yaml by the command."""

    workdir: Path
    ledger: Path | None
    suite: Sequence[SuiteItem]
    audit_ids: Sequence[str] | None
    """The audit part's items (`suite.rolling`): the only ones the audit accuracy counts."""
    train_data: Path | None
    """`train.data`: the drift reference until a round has built its own training rows."""
    work: Work
    round_command: Sequence[str]
    """argv; `{round}`, `{trigger_file}` and `{workdir}` in an argument are replaced."""
    before: LastRound | None = None
    """The workdir's round from before the watcher (a plain `tuneloop run`), if any."""
    config: Path | None = None
    """The loop.yaml, as the user named it: the `--config` of the commands a message names."""
    prospect: Callable[[Path | None], NextRound] | None = None
    """The next round's figures (growth, gate power, α) for a pilot log; None: not measured."""
    watched: tuple[Path, ...] = ()
    """Config files those figures depend on (re-read when one changes)."""


@dataclass(frozen=True)
class Step:
    action: Literal["idle", "held", "awaiting_approval", "round"]
    wait_s: float
    """How long to wait before the next step."""
    round_id: str | None = None
    settled: bool = False
    """A round reached `finished` or `refused` in this step."""


def estimate_cost(work: Work, last: RoundRow | None) -> CostEstimate:
    return CostEstimate(
        eval_items=work.eval_items,
        eval_samples=work.eval_items * work.n_samples * 2,
        train_steps=work.train_steps,
        seconds=last.wall_s if last else None,
        seconds_basis=f"wall time of round {last.round_id}" if last else "no finished round yet",
    )


def classify_exit(rc: int) -> tuple[RoundStatus, str]:
    """A round command's exit status as (round status, outcome in words)."""
    if rc == 0:
        return "finished", "promoted"
    if rc == 1:
        return "finished", "not promoted (rejected, or awaiting promotion approval)"
    if rc == 2:
        return "refused", "refused before compute"
    if rc == 3:
        return "finished", "failed: a phase failed"
    if rc in (EXIT_INTERRUPTED, EXIT_TERMINATED, -signal.SIGINT, -signal.SIGTERM):
        return "interrupted", f"interrupted (exit {rc}); resumable"
    if rc < 0:
        return "finished", f"failed: killed by {signal.Signals(-rc).name}"
    return "finished", f"failed: exit {rc}"


def new_row(trigger: RoundTrigger, trigger_file: Path, status: RoundStatus, now: float) -> RoundRow:
    return RoundRow(
        round_id=trigger.round_id,
        status=status,
        trigger=trigger,
        trigger_file=trigger_file,
        created_at=now,
        started_at=None,
        finished_at=None,
        exit_code=None,
        outcome=None,
        wall_s=0.0,
        attempts=0,
        pid=None,
        pid_started=None,
        approved_by=None,
        approved_at=None,
    )
