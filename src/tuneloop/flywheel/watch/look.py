"""One look of the watcher: which round came last, what it left, and the flywheel's status.

    looker = Looker(cfg.flywheel, ledger, suite.items, audit_ids)
    status = looker.look(last_round_of(state, workdir, train_data, before, ledger), pacing, now)

`Looker.look` is `gather_status` — the same record `tuneloop status` prints — except that it
does not re-read what has not changed: when the traffic files, the ledger and the last
round's training rows and sample log have the same size and modification time as at the
previous look, the previous measurements are reused and only the triggers and pacing are
evaluated again for `now`. A watcher with nothing new to look at then costs a few `stat`
calls per poll instead of parsing the whole traffic log (benchmarks/watch_idle.py).

What the watcher reads of a round is in `round_artifacts`; a round's folder is the round
command's (`<workdir>/rounds/<id>/`, the workdir of its loop).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tuneloop.config.flywheel import FlywheelConfig
from tuneloop.flywheel.exchanges import traffic_files
from tuneloop.flywheel.prospect import NextRound
from tuneloop.flywheel.status import FlywheelStatus, LastRound, gather_status, iso
from tuneloop.flywheel.triggers import (
    Observations,
    PacingState,
    TriggerDecision,
    evaluate_triggers,
)
from tuneloop.flywheel.watch.state import WatchState
from tuneloop.gate.ledger import Round, open_ledger
from tuneloop.loop.layout import RunLayout
from tuneloop.loop.rounds.power import champion_log
from tuneloop.samplelog import SUMMARY_FILE
from tuneloop.suite import SuiteItem


def round_dir(workdir: Path, round_id: str) -> Path:
    """The round's own folder (made by the round command; its presence means "resume")."""
    return RunLayout(workdir).round(round_id).workdir


def round_artifacts(
    workdir: Path, round_id: str, promoted: bool
) -> tuple[Path | None, Path | None]:
    """What the watcher reads of a round, where it exists: its training rows
    (`data/sft.jsonl`, the drift reference) and the sample log of the champion it leaves —
    `eval_post/` when it promoted, else `eval_pre/`. A round evaluates `audit+gate-NNN`;
    the audit accuracy is computed on the audit part's items of it alone (`gather_status`'s
    `audit_ids`), never on the gate slice the round looked at."""
    folder = round_dir(workdir, round_id)
    rows = RunLayout(folder).corpus_rows
    return (rows if rows.is_file() else None, champion_log(folder, promoted))


def last_round(workdir: Path, train_data: Path | None, audit_log: Path | None) -> LastRound | None:
    """The workdir's current round as status needs it (before any watcher: a plain
    `tuneloop run`); None before the first run."""
    from tuneloop.loop.state import load_state

    state = load_state(workdir)
    if state is None:
        return None
    # a redo that started a new round recorded when it replaced the previous one
    started = state.previous_runs[-1].superseded_at if state.previous_runs else state.created_at
    corpus = RunLayout(workdir).corpus_rows
    return LastRound(
        run_id=state.run_id,
        started_at=datetime.fromisoformat(started).timestamp(),
        training_rows=corpus if corpus.is_file() else train_data,
        audit_log=audit_log,
    )


@dataclass(frozen=True)
class _Seen:
    """One round as the since-line sees it, from the ledger or the watcher's state."""

    round_id: str
    started_at: float
    refused: bool
    """Refused before training: it took no label, so it moves no line."""
    promoted: bool


def _unix(when: str) -> float:
    """An ISO-8601 time as unix seconds; no zone means UTC (as the ledger writes them)."""
    at = datetime.fromisoformat(when)
    return (at if at.tzinfo else at.replace(tzinfo=timezone.utc)).timestamp()


def ledger_rounds(ledger: Path | None) -> list[Round]:
    """Every round the gate ledger holds, hand-run and watcher rounds alike (oldest first);
    [] without a ledger — the file is never created."""
    if ledger is None or not Path(ledger).is_file():
        return []
    with open_ledger(ledger) as opened:
        return opened.rounds()


def _seen_rounds(state: WatchState | None, ledger: Path | None) -> list[_Seen]:
    """The rounds of the ledger (the one record every `tuneloop run --round` writes, whoever
    started it), plus the watcher's rounds it does not hold (a `--round-command` that keeps
    no ledger); ordered by start."""
    seen: dict[str, _Seen] = {}
    for r in ledger_rounds(ledger):
        last = r.last.outcome if r.last else None
        seen[r.round_id] = _Seen(
            r.round_id,
            _unix(r.start.started_at),
            refused=last == "refused",
            promoted=last == "promoted",
        )
    for row in state.rounds(limit=100) if state is not None else []:
        if row.round_id not in seen:
            seen[row.round_id] = _Seen(
                row.round_id,
                row.started_at or row.created_at,
                refused=row.status == "refused",
                promoted=row.status == "finished" and row.exit_code == 0,
            )
    return sorted(seen.values(), key=lambda s: (s.started_at, s.round_id))


def last_round_of(
    state: WatchState | None,
    workdir: Path,
    train_data: Path | None,
    before: LastRound | None,
    ledger: Path | None = None,
) -> LastRound | None:
    """The latest round that took labels, as status needs it; `before` when there is none.

    One line between old and new labels for `tuneloop status` and the watcher alike: the
    start of the latest round in the ledger (hand-run with `run --round` or started by the
    watcher) that was not refused before training — a refused round trained on nothing, so
    its labels stay new. The drift reference is the newest training rows any such round
    built (else the pre-watcher round's, else `train.data`); the accuracy is the newest
    round's champion sample log (see `round_artifacts`).
    """
    taken = [s for s in _seen_rounds(state, ledger) if not s.refused]
    if not taken:
        return before
    found = [round_artifacts(workdir, s.round_id, s.promoted) for s in reversed(taken)]
    rows = next((f[0] for f in found if f[0] is not None), None)
    audit = next((f[1] for f in found if f[1] is not None), None)
    latest = taken[-1]
    return LastRound(
        run_id=latest.round_id,
        started_at=latest.started_at,
        training_rows=rows or (before.training_rows if before else None) or train_data,
        audit_log=audit or (before.audit_log if before else None),
    )


def describe_poll(decision: TriggerDecision) -> str:
    """One line: every trigger with its figures, the next gate's power, then what follows."""
    text = "; ".join(
        f"{f.name} {'FIRES' if f.fired else 'no'} ({f.detail})" for f in decision.firings
    )
    if decision.power is not None:
        text += f"; power: {decision.power.text()}"
    if decision.run:
        return f"{text} → a round starts"
    if decision.fired and decision.blocked_by:
        return f"{text}; pacing holds the round: {'; '.join(decision.blocked_by)}"
    if decision.fired:
        return f"{text}; the round is held for power"
    return f"{text}; no trigger fired, next look in {decision.next_poll_s:g} s"


def observations_of(status: FlywheelStatus) -> Observations:
    """The figures the triggers were judged on, from a status record."""
    growth = status.traffic.growth
    return Observations(
        new_labels=growth.trainable if growth else status.traffic.new_labels,
        labelled=status.traffic.new_labels if growth else None,
        recent_requests=status.traffic.recent,
        drift={d.feature: d.psi for d in status.drift},
        audit_accuracy=status.audit.accuracy if status.audit else None,
        audit_upper=status.audit.wilson[1] if status.audit else None,
        power=status.triggers.power,
    )


def _stat(path: Path | None) -> tuple[str, int, int] | None:
    if path is None:
        return None
    try:
        st = path.stat()
    except OSError:
        return (str(path), -1, -1)
    return (str(path), st.st_size, st.st_mtime_ns)


class Looker:
    """`gather_status`, reusing the previous measurements while the inputs are unchanged."""

    def __init__(
        self,
        flywheel: FlywheelConfig,
        ledger: Path | None,
        suite: Sequence[SuiteItem],
        audit_ids: Collection[str] | None = None,
        prospect: Callable[[Path | None], NextRound] | None = None,
        watched: Sequence[Path] = (),
    ) -> None:
        self.flywheel = flywheel
        self.ledger = ledger
        self.suite = suite
        self.audit_ids = audit_ids
        self.prospect = prospect
        """The next round's figures for a pilot log (`flywheel.prospect.next_round`)."""
        self.watched = tuple(watched)
        """Config files the figures depend on (the suite, the corpus config)."""
        self.reused = False
        """Whether the latest look reused the previous measurements."""
        self._previous: tuple[Any, FlywheelStatus] | None = None

    def inputs(self, last: LastRound | None) -> Any:
        """What the measurements depend on: the last round and the files' sizes and times."""
        files: list[Path | None] = list(traffic_files(self.flywheel.traffic))
        if self.ledger is not None:
            files += [self.ledger, self.ledger.with_name(self.ledger.name + "-wal")]
        if last is not None:
            summary = last.audit_log / SUMMARY_FILE if last.audit_log else None
            files += [last.training_rows, summary]
        files += list(self.watched)
        return (last, tuple(_stat(p) for p in files))

    def look(self, last: LastRound | None, pacing: PacingState, now: float) -> FlywheelStatus:
        key = self.inputs(last)
        if self._previous is not None and self._previous[0] == key:
            self.reused = True
            before = self._previous[1]
            decision = evaluate_triggers(
                observations_of(before),
                self.flywheel.triggers,
                pacing,
                now,
                poll_s=self.flywheel.poll_s,
            )
            return before.model_copy(update={"at": iso(now), "triggers": decision})
        self.reused = False
        nxt = self.prospect(last.audit_log if last else None) if self.prospect else None
        status = gather_status(
            self.flywheel,
            ledger_path=self.ledger,
            last_round=last,
            suite=self.suite,
            audit_ids=self.audit_ids,
            pacing=pacing,
            now=now,
            next_round=nxt,
        )
        self._previous = (key, status)
        return status
