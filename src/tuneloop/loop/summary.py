"""The line a person reads when `tuneloop run` ends, and the exit status it implies."""

from __future__ import annotations

from rich.console import Console

from tuneloop.config import LoopConfig
from tuneloop.loop.layout import RunLayout
from tuneloop.loop.state import RunState
from tuneloop.records import read_record, read_record_if_exists
from tuneloop.tracking import TrackingRecord

RETRY_RUN = "the next `tuneloop run` retries"
"""What retries a failed MLflow write of a loop run: its `track` phase runs again in place."""
RETRY_ROUND = "a flywheel round that has ended is not run again, so nothing retries it"
"""A round's: `--round rNNNN` only re-reports a round that has ended."""


def print_outcome(
    cfg: LoopConfig, state: RunState, wall_s: float, phase_s: float, retry: str = RETRY_RUN
) -> int:
    """Print the verdict and where to look; return the exit status (0 promote, 1 otherwise).

    `phase_s` is the time spent inside phases run by this invocation; the rest of `wall_s`
    is orchestration (hashing inputs and outputs, state writes, skips). `retry` says what
    retries a failed MLflow write (`RETRY_RUN`, or `RETRY_ROUND` for a flywheel round).
    """
    console = Console()
    work = sum(r.duration_s or 0.0 for r in state.phases.values() if r.status == "done")
    overhead = wall_s - phase_s
    share = f" ({100 * overhead / wall_s:.1f}%)" if wall_s > 0 else ""
    console.print(
        f"run {state.run_id}: this invocation {wall_s:.1f}s, of which phase work {phase_s:.1f}s "
        f"and orchestration {overhead:.1f}s{share}"
    )
    run = RunLayout(cfg.workdir)
    if run.capstone_md.exists():
        console.print(f"report: {run.capstone_md}")
    _print_tracking(cfg, console, retry)
    verdict_path = run.verdict
    if not cfg.gate.enabled or not verdict_path.exists():
        console.print(f"gate: off; phase work {work:.1f}s")
        return 0
    from tuneloop.gate.promotion import Promotion
    from tuneloop.gate.verdict import GateVerdict

    decision = read_record(verdict_path, GateVerdict).decision
    color = "green" if decision == "promote" else "yellow"
    console.print(f"verdict: [bold {color}]{decision}[/bold {color}] ({verdict_path})")
    if not run.promotion.exists():
        return 1  # decided, but not (yet) in its final place: the champion is unchanged
    promotion = read_record(run.promotion, Promotion)
    if promotion.champion_version is not None:
        where = promotion.descriptor.get("location", "")
        console.print(f"champion: v{promotion.champion_version} ({where})")
        return 0
    return 1


def _print_tracking(cfg: LoopConfig, console: Console, retry: str) -> None:
    """The MLflow mirror's state (`tracking.mlflow`), repeated here so a failure is not missed."""
    path = RunLayout(cfg.workdir).tracking
    rec = read_record_if_exists(path, TrackingRecord) if cfg.tracking.mlflow else None
    if rec is None:
        return
    if rec.status == "failed":
        line = (
            f"mlflow: not written (attempt {rec.attempts}; the ledger is the source of truth; "
            f"{retry}): {path}"
        )
        console.print(line, style="yellow", markup=False, highlight=False, soft_wrap=True)
        return
    version = f", {rec.registered_model} v{rec.model_version}" if rec.model_version else ""
    aliases = "".join(f" @{a}" for a in rec.aliases)
    line = f"mlflow: run {rec.mlflow_run_id}{version}{aliases} ({rec.tracking_uri})"
    console.print(line, markup=False, highlight=False, soft_wrap=True)
