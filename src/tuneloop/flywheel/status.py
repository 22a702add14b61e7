"""Where the flywheel stands: the champion, new labels (before and after the corpus steps),
drift, audit accuracy, the next round's gate power and the flywheel's α budget, triggers, and
for a served cascade its recent traffic per tier (`tier_traffic`).

    status = gather_status(cfg.flywheel, ledger_path=ledger, last_round=last, suite=suite,
                           pacing=pacing, now=time.time(), next_round=nxt)
    print(render_status(status))          # tuneloop.flywheel.render

`gather_status` only reads: the gate ledger (through `gate.promotion.champion_history`, which
never creates the file), the traffic logs, the last round's training rows and its audit-part
sample log. It writes nothing and starts nothing; the watcher acts on the same record.
Every figure is measured from those artifacts or marked not measured (`None` with a note).

The audit accuracy is the mean item score (missing samples count as 0, as everywhere) with
the Wilson interval of `stats.wilson_interval` over items — the report's per-arm interval.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from tuneloop import stats
from tuneloop.config.flywheel import FlywheelConfig
from tuneloop.errors import InputError
from tuneloop.flywheel.exchanges import count_new_labels, read_traffic, recent_exchanges
from tuneloop.flywheel.features import FeatureDrift, measure_drift, tag_index
from tuneloop.flywheel.growth import Growth, count_growth
from tuneloop.flywheel.prospect import NextRound
from tuneloop.flywheel.tier_traffic import TierTraffic, measure_tiers
from tuneloop.flywheel.triggers import Observations, PacingState, TriggerDecision, evaluate_triggers
from tuneloop.gate.sequence import AlphaBudget
from tuneloop.records import Record
from tuneloop.suite import SuiteItem


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ChampionStatus(_Part):
    version: int
    """Champion version in the ledger."""
    summary: str
    """One line: model name or path and hash."""
    since: str
    """ISO-8601 UTC time it became champion."""
    via: str
    """`gate` (promoted) or `registered` (a base)."""
    run_id: str | None
    """The round that produced it."""
    descriptor: dict[str, Any]
    """The champion descriptor as stored."""


class AuditAccuracy(_Part):
    log: str
    """The sample-log folder it was computed from."""
    model: str
    """The model that log evaluated."""
    items: int
    accuracy: float
    """Mean item score (missing samples count as 0)."""
    wilson: tuple[float, float]
    """95% Wilson interval over items."""
    not_scored: int
    """Samples missing or with a harness error (counted as 0)."""


class TrafficSummary(_Part):
    files: list[str]
    """Traffic log files read."""
    exchanges: int
    """Exchanges in the logs."""
    recent: int
    """Exchanges since the last round started."""
    new_labels: int
    """Exchanges labelled (verdict or correction) since the last round started."""
    orphan_feedback: int
    """Feedback lines since then for a completion id the logs do not hold."""
    missing: list[str] = []
    """`flywheel.traffic` paths that do not exist yet (the managed proxy's, before it ran)."""
    skipped_lines: list[str] = []
    """Log lines not read, each `file:line: why` (a torn line after a crash; never fatal)."""
    untrainable_labels: int = 0
    """Labels since then on text completions, which make no training row (not new labels)."""
    growth: Growth | None = None
    """The new labels counted as the next round's corpus steps would keep them (what
    `min_new_labels` counts); None: not counted (no loop config given)."""


class FlywheelStatus(Record):
    """One look at the flywheel (`tuneloop status --json`)."""

    KIND = "flywheel_status"
    VERSION = 3

    at: str
    """ISO-8601 UTC time of the look."""
    champion: ChampionStatus | None
    """The current champion; None when the ledger names none."""
    last_round: str | None
    """Run id of the last round; None before the first."""
    since: str | None
    """ISO-8601 UTC start of the last round: the line between old and new traffic."""
    traffic: TrafficSummary
    drift: list[FeatureDrift]
    """Per feature: the last round's training rows against traffic since it started."""
    audit: AuditAccuracy | None
    """The champion's accuracy on the audit part; None when no audit log was given."""
    triggers: TriggerDecision
    """Which triggers would fire now, and what pacing says."""
    tiers: TierTraffic | None = None
    """A served cascade's recent traffic per tier and its first tier's confidence drift
    (`flywheel.tier_traffic`); None when no recent exchange carries a cascade trace."""
    alpha: AlphaBudget | None = None
    """The flywheel's α: spent by each round's bar, remaining under `gate.sequence`, and the
    next round's; None: not read (no loop config given)."""
    power_note: str | None = None
    """Why the next round's gate power is not measured (`triggers.power` is then None)."""


@dataclass(frozen=True)
class LastRound:
    """What status needs of the last round (the loop's workdir holds it)."""

    run_id: str
    started_at: float
    """Unix seconds."""
    training_rows: Path | None
    """Its training data (`data/sft.jsonl`): the drift reference; None: drift not measured."""
    audit_log: Path | None
    """Its sample log of the champion on the audit part; None: accuracy not measured."""


def iso(when: float) -> str:
    return datetime.fromtimestamp(when, timezone.utc).isoformat(timespec="seconds")


def current_champion(ledger_path: Path | None) -> ChampionStatus | None:
    """The ledger's current champion, read without creating the ledger."""
    from tuneloop.gate.champion import describe
    from tuneloop.gate.promotion import champion_history

    history = champion_history(ledger_path) if ledger_path is not None else []
    if not history:
        return None
    last = history[-1]
    return ChampionStatus(
        version=last.version,
        summary=describe(last.descriptor),
        since=last.promoted_at,
        via=last.via,
        run_id=last.run_id,
        descriptor=last.descriptor,
    )


def audit_accuracy(
    log: Path, audit_ids: Collection[str] | None = None, confidence: float = 0.95
) -> AuditAccuracy:
    """Mean item score and its Wilson interval from a sample log, over the audit part's items
    of it (`audit_ids`; None: every item of the log). A round's log holds its gate slice
    too: those items are left out, so the figure is the audit part's alone."""
    from tuneloop.samplelog import load_sample_log, score_grid

    summary, rows = load_sample_log(log)
    ids = summary.item_ids
    if audit_ids is not None:
        wanted = set(audit_ids)
        ids = [i for i in ids if i in wanted]
        rows = [r for r in rows if r.item_id in wanted]
        if not ids:
            raise InputError(
                f"{log}: the sample log holds none of the audit part's {len(wanted)} items "
                "(--audit-log: give the champion's log on the audit part)"
            )
    n_samples = summary.sampling.n_samples
    grid = score_grid(rows, ids, n_samples, str(log))
    items = len(ids)
    per_item = grid.values.mean(axis=1)
    successes = min(float(per_item.sum()), float(items))
    return AuditAccuracy(
        log=str(log),
        model=summary.model,
        items=items,
        accuracy=successes / items,
        wilson=stats.wilson_interval(successes, items, confidence),
        not_scored=grid.status["missing"] + grid.status["harness_error"],
    )


def gather_status(
    flywheel: FlywheelConfig,
    *,
    ledger_path: Path | None,
    last_round: LastRound | None,
    suite: Sequence[SuiteItem] = (),
    audit_ids: Collection[str] | None = None,
    audit_log: Path | None = None,
    pacing: PacingState | None = None,
    now: float,
    next_round: NextRound | None = None,
) -> FlywheelStatus:
    """One read-only look (see the module docstring); `suite` items give requests a tag;
    `audit_ids` are the audit part's items (`suite.rolling`), the only ones the accuracy is
    computed on (None: every item of the log); `audit_log` (`status --audit-log`) replaces
    the last round's sample log, also before any round; `next_round` (`flywheel.prospect`)
    counts the new labels through the corpus steps and states the gate's power and α."""
    since = last_round.started_at if last_round else None
    if pacing is None:
        pacing = PacingState(last_round_at=since)
    # a path not there yet (the managed proxy's folder, which the watcher creates) is a
    # flywheel that has served nothing, not a broken one; `status` refuses any other
    missing = [str(p) for p in flywheel.traffic if not Path(p).exists()]
    traffic = read_traffic([p for p in flywheel.traffic if str(p) not in missing])
    labels = count_new_labels(traffic, since)
    growth = None
    if next_round is not None:
        growth = count_growth(
            traffic,
            since,
            corpus=next_round.corpus,
            trained_rows=last_round.training_rows if last_round else None,
            suites=next_round.suites,
        )
    recent = recent_exchanges(traffic, since)
    features = flywheel.triggers.features
    reference = last_round.training_rows if last_round else None
    drift = measure_drift(reference, recent, features=features, tags=tag_index(suite))
    log = audit_log or (last_round.audit_log if last_round else None)
    audit = audit_accuracy(log, audit_ids) if log is not None else None
    observed = Observations(
        new_labels=growth.trainable if growth else labels.new,
        labelled=labels.new if growth else None,
        recent_requests=len(recent),
        drift={d.feature: d.psi for d in drift},
        audit_accuracy=audit.accuracy if audit else None,
        audit_upper=audit.wilson[1] if audit else None,
        power=next_round.power if next_round else None,
    )
    return FlywheelStatus(
        at=iso(now),
        champion=current_champion(ledger_path),
        last_round=last_round.run_id if last_round else None,
        since=iso(since) if since is not None else None,
        traffic=TrafficSummary(
            files=[str(p) for p in traffic.files],
            exchanges=len(traffic.exchanges),
            recent=len(recent),
            new_labels=labels.new,
            orphan_feedback=labels.orphans,
            missing=missing,
            skipped_lines=traffic.skipped,
            untrainable_labels=labels.untrainable,
            growth=growth,
        ),
        drift=drift,
        audit=audit,
        triggers=evaluate_triggers(
            observed, flywheel.triggers, pacing, now, poll_s=flywheel.poll_s
        ),
        tiers=measure_tiers(recent, min_requests=flywheel.triggers.drift_min_requests),
        alpha=next_round.alpha if next_round else None,
        power_note=next_round.power_note if next_round else None,
    )
