"""`tuneloop run CONFIG --round ID|next`: plan, check, record and run one round of the flywheel.

Order, so that a refused round costs nothing and leaves a trace: plan the lineage (ledger read
only) → preflight the round's config → check a new round's power (`power`: a gate that cannot
detect the target effect holds it) → write `round.json` and the ledger's start row → run the
phases (resuming what a crash left) → append the outcome and the experiment-log entry. A
refusal at any step before compute (no fresh gate slice, no champion, a bad config) is recorded
as `refused` with its reason and exits 2 — except what is no round at all, which is refused
with nothing written: a config without `suite.rolling`, an unreadable trigger file, or a
`--round rNNNN` that names no known round (and is neither the next id nor the watcher's).
`next` resumes the latest round when it has not ended (failed, interrupted or killed), and
starts a new one otherwise.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rich.console import Console

from tuneloop.backend_choice import resolve_serve
from tuneloop.config import LoopConfig
from tuneloop.errors import EXIT_PHASE_FAILED, InputError, PhaseFailed
from tuneloop.gate.ledger import RoundEnd, RoundStart, last_outcome
from tuneloop.gate.verdict_record import GateVerdict
from tuneloop.loop.base_overlay import with_chat_template
from tuneloop.loop.layout import RunLayout, ledger_path
from tuneloop.loop.phases import CHALLENGER_PHASES, PHASES, Phase
from tuneloop.loop.preflight import check_before_compute
from tuneloop.loop.rounds.lineage import (
    RoundRecord,
    commit_round,
    existing_round,
    next_round_id,
    plan_round,
    read_trigger,
    require_rolling,
    resolve_round_id,
    round_config,
)
from tuneloop.loop.rounds.outcome import TERMINAL, record_outcome
from tuneloop.loop.rounds.power import champion_pilot, check_round_power, next_alpha, round_power
from tuneloop.loop.rounds.preview import preview_round
from tuneloop.loop.runner import Interrupted, Runner, Selection
from tuneloop.loop.summary import RETRY_ROUND, print_outcome
from tuneloop.records import read_record_if_exists

console = Console(stderr=True)


ENDED_EXIT = {"promoted": 0, "finished": 0, "rejected": 1, "awaiting_approval": 1, "refused": 2}
"""The exit status that re-reports a round that has ended (nothing is run or recorded)."""


def choose_round(cfg: LoopConfig, asked: str, trigger: dict[str, Any] | None = None) -> str:
    """`next` → the latest round if it has not ended, else a new id; else the id asked for,
    which must be a known round, the next new one, or the one the watcher's trigger names
    (`resolve_round_id`: InputError otherwise, before anything is written)."""
    if asked != "next":
        return resolve_round_id(cfg, asked, trigger or {})
    fresh = next_round_id(cfg)
    number = int(fresh[1:]) - 1
    if number >= 1:
        latest = f"r{number:04d}"
        if existing_round(cfg, latest):
            last = last_outcome(ledger_path(cfg), latest)
            if last is None or last.outcome not in TERMINAL:
                return latest
    return fresh


def prepare(
    cfg: LoopConfig,
    config_path: Path,
    overrides: list[str] | None,
    round_id: str,
    trigger: dict[str, Any],
    *,
    read_only: bool = False,
) -> tuple[RoundRecord, LoopConfig, list[str]]:
    """The round's lineage and config, checked before compute; raises InputError if refused.
    `read_only` (`--plan`): a missing ledger is read as an empty one, never created."""
    record = existing_round(cfg, round_id)
    new = record is None
    if record is None:
        plan = preview_round if read_only else plan_round
        record = plan(cfg, config_path, round_id, trigger)
    rcfg = round_config(cfg, record)
    warnings = check_before_compute(rcfg, config_path, overrides)
    if new and read_only:
        power = round_power(rcfg, champion_pilot(cfg), next_alpha(cfg))
        warnings.append(f"{'held for power' if power.held else 'power'}: {power.text()}")
    elif new:  # a round already planned was checked then; resuming it never holds it
        check_round_power(cfg, rcfg)
    return record, rcfg, warnings


def refuse(cfg: LoopConfig, round_id: str, trigger_file: Path | None, err: InputError) -> None:
    """Record a round refused before compute (a trigger file that cannot be read is just
    the error: nothing to record it against)."""
    start = existing_round(cfg, round_id)
    trigger = read_trigger(trigger_file) if trigger_file is not None else {}
    started = (
        RoundStart.of(start)
        if start
        else RoundStart(round_id=round_id, started_at=_now(), gate_slice="", trigger=trigger)
    )
    record_outcome(cfg, round_id, "refused", start=started, reason=str(err).splitlines()[0])


@dataclass(frozen=True)
class RoundRequest:
    """What `tuneloop run --round` was asked."""

    config_path: Path
    overrides: list[str] | None
    selection: Selection
    asked: str = "next"
    """`next` or a round id."""
    trigger_file: Path | None = None


def execute(
    cfg: LoopConfig,
    req: RoundRequest,
    *,
    plan: Callable[[Runner], None] | None = None,
    phases: tuple[Phase, ...] = PHASES,
    challenger_phases: tuple[Phase, ...] = CHALLENGER_PHASES,
) -> int:
    """Plan, check, record and run one round; returns the exit status (see the module doc).

    With `plan`, only prints what the round would run (through `plan(runner)`), recording
    and creating nothing (no ledger, no workdir). `phases` and `challenger_phases` replace
    the phase tables (tests run fake model phases)."""
    require_rolling(cfg)  # not a flywheel config: no round to record a refusal against
    trigger = read_trigger(req.trigger_file)  # an unreadable one is just the error
    round_id = choose_round(cfg, req.asked, trigger)
    last = last_outcome(ledger_path(cfg), round_id)
    ended = last.outcome if last else None
    if ended in ENDED_EXIT:  # asked again after it ended (a watcher collecting its status)
        console.print(f"round {round_id} has ended: {ended}", highlight=False)
        return ENDED_EXIT[ended]
    try:
        record, rcfg, warnings = prepare(
            cfg, req.config_path, req.overrides, round_id, trigger, read_only=plan is not None
        )
    except InputError as err:
        if plan is None:
            refuse(cfg, round_id, req.trigger_file, err)
        raise
    for warning in warnings:
        console.print(warning, highlight=False)
    boot = " (bootstrap)" if record.bootstrap else ""
    console.print(
        f"round {round_id}: from champion v{record.parent_version}{boot}, gate slice "
        f"{record.gate_slice}, in {rcfg.workdir}",
        highlight=False,
    )
    rcfg, choice = resolve_serve(with_chat_template(rcfg))  # `serve.backend: auto`, its base
    if choice is not None:
        console.print(choice.line, highlight=False)
    runner = Runner(rcfg, req.config_path, req.selection, phases, challenger_phases)
    if plan is not None:
        plan(runner)
        return 0
    try:
        return run_round(cfg, record, runner)
    except PhaseFailed as err:
        console.print(f"error: {err}\nstate: {RunLayout(rcfg.workdir).state}", highlight=False)
        return EXIT_PHASE_FAILED


def run_round(cfg: LoopConfig, record: RoundRecord, runner: Runner) -> int:
    """Run the round's phases; record its outcome; return the exit status."""
    commit_round(cfg, record)
    rcfg = runner.cfg
    start = RoundStart.of(record)
    t0 = time.perf_counter()

    def done(outcome: RoundEnd, reason: str = "") -> None:
        record_outcome(
            cfg,
            record.round_id,
            outcome,
            round_cfg=rcfg,
            start=start,
            run_id=runner.state.run_id if runner.state else None,
            reason=reason,
            wall_s=time.perf_counter() - t0,
        )

    try:
        state = runner.run()
    except InputError as err:  # the runner's preflight: e.g. the slice was consumed meanwhile
        done("refused", str(err).splitlines()[0])
        raise
    except PhaseFailed as err:
        done("failed", str(err).splitlines()[0])
        raise
    except (Interrupted, KeyboardInterrupt):
        done("interrupted", f"stopped by a signal; `--round {record.round_id}` resumes it")
        raise
    code = print_outcome(rcfg, state, runner.wall_s, runner.phase_time, RETRY_ROUND)
    done(_outcome(rcfg, code))
    return code


def _outcome(rcfg: LoopConfig, code: int) -> RoundEnd:
    if code == 0:
        return "promoted" if rcfg.gate.enabled else "finished"
    verdict = read_record_if_exists(RunLayout(rcfg.workdir).verdict, GateVerdict)
    if verdict is not None and verdict.decision == "promote":
        return "awaiting_approval"
    return "rejected"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
