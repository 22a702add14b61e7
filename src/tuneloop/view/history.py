"""The flywheel's history as `tuneloop view` shows it, read typed from the ledger and its runs.

    dashboard = gather(resolve(Path("loop.yaml"), None))

One read of the gate ledger (`Ledger.rounds`, `.verdicts`, `.champions`: typed rows — a
round's `RoundStart` and `RoundOutcome`s, `GateVerdict`s, `Champion`s — so a changed row is an
error naming the ledger, not a KeyError in a template), the experiment log beside it, the
watcher's state (`flywheel.watch.state`) and, per run, its archived report files. Nothing is
written.

What each figure is:
- a round's decision is its latest outcome (`promoted`, `rejected`, `refused` before training,
  `awaiting_approval`, `failed`, `interrupted`); a round with none yet is `running`. A gate
  verdict with no round (a plain `tuneloop run` or `tuneloop gate`) is its own entry;
- Δ with its CI is the round's report on the audit part (the paired bootstrap CI written in
  its outcome), or for a run outside rounds its archived `report/delta.json`;
- drift (PSI per feature) is what the watcher measured at the look that started the round
  (its trigger record); a manual round has none;
- audit accuracy is the round's champion (pre) and challenger (post) mean item score on the
  audit part with the Wilson interval over items — `tuneloop status`'s definition;
- a portfolio round's challengers are its run's `challengers/selection.json` (archived copy
  first), read typed: each challenger's validation mean, status, and which one was selected;
- the error budget is `gate.sequence.alpha_budget`'s: the α each round spent (its α_k under a
  sequence rule), spent and remaining, and the next round's α; with no rule, the rounds at
  their α and the chance of a false promotion nothing bounds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuneloop.gate.champion import describe
from tuneloop.gate.explog import log_path
from tuneloop.gate.ledger import AuditFigures, Champion, Round, open_ledger
from tuneloop.gate.sequence import AlphaBudget, alpha_budget
from tuneloop.gate.verdict_record import GateVerdict
from tuneloop.records import parse_record, read_record
from tuneloop.records.selection import PortfolioRecord
from tuneloop.view.explog_entries import LogEntry, read_entries
from tuneloop.view.sources import (
    Sources,
    capstone_report,
    check_ledger,
    delta_report,
    find_artifact,
    link_key,
    portfolio_record,
)

if TYPE_CHECKING:
    from tuneloop.flywheel.triggers import Observations
    from tuneloop.flywheel.watch import Decision, RoundRow, RoundTrigger


DECISION_TEXT = {
    "promoted": "promoted",
    "rejected": "rejected",
    "refused": "refused before training",
    "awaiting_approval": "awaiting approval",
    "failed": "failed",
    "interrupted": "interrupted",
    "finished": "finished",
    "running": "running (no outcome yet)",
    "bootstrap": "bootstrap champion",
    "registered": "registered champion",
}


@dataclass(frozen=True)
class DeltaFigure:
    """Δ with its two-sided CI, for the forest plot."""

    delta: float
    low: float
    high: float
    n_items: int
    where: str
    """What it was measured on (`audit part`, `report slice`)."""


@dataclass(frozen=True)
class ReportLink:
    key: str
    """Folder under `runs/` (the run id, or a hash of an odd one)."""
    path: Path
    """The report.html on disk."""

    @property
    def href(self) -> str:
        """Relative: the same in the static bundle and in the served app."""
        return f"runs/{self.key}/report.html"


@dataclass(frozen=True)
class RoundView:
    """One entry of the timeline: a round, or a gate verdict outside any round."""

    key: str
    """`r0001`, or the run id of a verdict outside rounds."""
    started_at: str
    ended_at: str | None
    decision: str
    """A key of DECISION_TEXT."""
    parent_version: int | None
    from_bootstrap: bool
    gate_slice: str
    trigger: str
    """What fired, in words."""
    reason: str
    run_id: str | None
    verdict: GateVerdict | None
    delta: DeltaFigure | None
    audit: AuditFigures | None
    new_champion: int | None
    look: Observations | None
    """What the watcher measured at the look that started the round."""
    drift_threshold: float | None
    """The PSI at which its drift trigger fires, at that look (None: not configured)."""
    report: ReportLink | None
    wall_s: float | None
    ends: int
    """Outcomes recorded (a resumed round has more than one)."""
    portfolio: PortfolioRecord | None = None
    """A portfolio round's challengers and choice (None: not a portfolio round, or its run's
    `challengers/selection.json` is in neither its archive nor its workdir)."""

    @property
    def decision_text(self) -> str:
        return DECISION_TEXT.get(self.decision, self.decision.replace("_", " "))


@dataclass(frozen=True)
class ChampionEvent:
    version: int
    since: str
    until: str | None
    """When the next version replaced it; None for the current champion."""
    via: str
    """`gate` (promoted), `bootstrap` or `registered`."""
    run_id: str | None
    summary: str
    descriptor: dict[str, Any]


@dataclass(frozen=True)
class WatcherView:
    path: Path
    rounds: list[RoundRow]
    decisions: list[Decision]


@dataclass(frozen=True)
class Dashboard:
    title: str
    ledger: Path
    generated_at: str
    rounds: list[RoundView]
    """Oldest first."""
    champions: list[ChampionEvent]
    log: list[LogEntry]
    log_path: Path
    watcher: WatcherView | None
    budget: AlphaBudget
    """The flywheel's error budget: α spent and remaining, each round's α (`gate.sequence`)."""


def gather(sources: Sources, *, watcher_decisions: int = 200) -> Dashboard:
    """Read everything the dashboard shows (see the module docstring). A ledger gone since
    `resolve` is an InputError naming it: opening it would create an empty one."""
    check_ledger(sources.ledger, sources.origin)
    with open_ledger(sources.ledger) as ledger:
        round_rows, verdict_rows, champion_rows = (
            ledger.rounds(),
            ledger.verdicts(),
            ledger.champions(),
        )
    judged = {v.run_id: v for v in verdict_rows}
    events = champion_events(champion_rows)
    crowned = {c.run_id: c.version for c in events if c.run_id}
    views = [_round(sources, row, judged, crowned) for row in round_rows]
    in_rounds = {o.run_id for row in round_rows for o in row.outcomes}
    views += [_run(sources, v, crowned) for rid, v in judged.items() if rid not in in_rounds]
    views.sort(key=lambda v: v.started_at)
    log = log_path(sources.ledger)
    return Dashboard(
        title=sources.title,
        ledger=sources.ledger,
        generated_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        rounds=views,
        champions=events,
        log=read_entries(log),
        log_path=log,
        watcher=_watcher(sources.workdir, watcher_decisions),
        budget=alpha_budget(sources.gate, sources.ledger),
    )


def champion_events(rows: list[Champion]) -> list[ChampionEvent]:
    """Every champion version, oldest first, with when the next one replaced it."""
    out = []
    for i, c in enumerate(rows):
        until = rows[i + 1].promoted_at if i + 1 < len(rows) else None
        out.append(
            ChampionEvent(
                version=c.version,
                since=c.promoted_at,
                until=until,
                via=c.via,
                run_id=c.run_id,
                summary=describe(c.descriptor),
                descriptor=c.descriptor,
            )
        )
    return out


def _round(
    sources: Sources,
    row: Round,
    judged: dict[str, GateVerdict],
    crowned: dict[str, int],
) -> RoundView:
    where = f"{sources.ledger}: round {row.round_id!r}"
    start, ends, last = row.start, row.outcomes, row.last
    look = _look(start.trigger, where)
    run_id = last.run_id if last else None
    decision = last.outcome if last else "running"
    if decision == "awaiting_approval" and run_id in crowned:
        decision = "promoted"  # `tuneloop approve` completed it later
    audit = last.audit if last else None
    delta = (
        DeltaFigure(audit.delta, audit.ci[0], audit.ci[1], audit.n_items, "audit part")
        if audit is not None
        else _archived_delta(sources, run_id, start.round_id)
    )
    return RoundView(
        key=start.round_id,
        started_at=start.started_at or (last.ended_at if last else ""),
        ended_at=last.ended_at if last else None,
        decision=decision,
        parent_version=start.parent_version,
        from_bootstrap=start.bootstrap,
        gate_slice=start.gate_slice,
        trigger=trigger_text(start.trigger),
        reason=last.reason if last else "",
        run_id=run_id,
        verdict=judged.get(run_id) if run_id else None,
        delta=delta,
        audit=audit,
        new_champion=crowned.get(run_id) if run_id else None,
        look=look.observations if look else None,
        drift_threshold=next((f.threshold for f in look.firings if f.name == "drift"), None)
        if look
        else None,
        report=_report(sources, run_id, start.round_id),
        wall_s=sum(e.wall_s for e in ends) if ends else None,
        ends=len(ends),
        portfolio=_portfolio(sources, run_id, start.round_id),
    )


def _run(sources: Sources, v: GateVerdict, crowned: dict[str, int]) -> RoundView:
    """A gate verdict outside any round (a plain loop run, or `tuneloop gate`)."""
    decision = {"promote": "promoted", "reject": "rejected"}.get(v.decision, v.decision)
    if v.decision == "awaiting_approval" and v.run_id in crowned:
        decision = "promoted"
    return RoundView(
        key=v.run_id,
        started_at=v.decided_at,
        ended_at=v.decided_at,
        decision=decision,
        parent_version=v.champion_version,
        from_bootstrap=False,
        gate_slice=v.slice,
        trigger="a run outside the flywheel's rounds",
        reason="; ".join(v.reasons),
        run_id=v.run_id,
        verdict=v,
        delta=_archived_delta(sources, v.run_id, None),
        audit=None,
        new_champion=crowned.get(v.run_id) or v.new_champion_version,
        look=None,
        drift_threshold=None,
        report=_report(sources, v.run_id, None),
        wall_s=None,
        ends=1,
        portfolio=_portfolio(sources, v.run_id, None),
    )


def _report(sources: Sources, run_id: str | None, round_id: str | None) -> ReportLink | None:
    if run_id is None:
        return None
    path = find_artifact(sources, run_id, round_id, capstone_report)
    return ReportLink(link_key(run_id), path) if path is not None else None


def _portfolio(
    sources: Sources, run_id: str | None, round_id: str | None
) -> PortfolioRecord | None:
    path = find_artifact(sources, run_id, round_id, portfolio_record) if run_id else None
    return read_record(path, PortfolioRecord) if path is not None else None


def _archived_delta(
    sources: Sources, run_id: str | None, round_id: str | None
) -> DeltaFigure | None:
    from tuneloop.report.record import DeltaReport  # numpy, through stats

    path = find_artifact(sources, run_id, round_id, delta_report) if run_id else None
    if path is None:
        return None
    d = read_record(path, DeltaReport)
    return DeltaFigure(d.delta, d.delta_ci[0], d.delta_ci[1], d.n_items, "report slice")


def _look(trigger: dict[str, Any], where: str) -> RoundTrigger | None:
    """The watcher's trigger record of a round; None for a manual round or another trigger."""
    from tuneloop.flywheel.watch import RoundTrigger

    if not str(trigger.get("schema", "")).startswith(f"tuneloop.{RoundTrigger.KIND}/"):
        return None
    return parse_record(trigger, RoundTrigger, f"{where}: trigger")


def trigger_text(trigger: dict[str, Any]) -> str:
    """What fired, with its figures (the experiment log's words), or the keys as given."""
    if not trigger:
        return "manual (no trigger file)"
    firings = [f for f in trigger.get("firings", []) if isinstance(f, dict) and f.get("fired")]
    if firings:
        return "; ".join(f"{f.get('name')}: {f.get('detail')}" for f in firings)
    return ", ".join(f"{k} {v}" for k, v in trigger.items() if k != "schema")


def _watcher(workdir: Path | None, decisions: int) -> WatcherView | None:
    """The watcher's rounds and latest decisions, when a watcher ran in `workdir`."""
    from tuneloop.flywheel.paths import FlywheelPaths
    from tuneloop.flywheel.watch import WatchState

    if workdir is None or not FlywheelPaths(workdir).state.is_file():
        return None
    state = WatchState.open(FlywheelPaths(workdir).state, create=False)
    try:
        return WatcherView(state.path, state.rounds(100_000), state.decisions(decisions))
    finally:
        state.close()
