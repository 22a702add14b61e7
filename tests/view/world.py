"""A small flywheel history for the dashboard's tests, in ~3 seconds: real rounds on fake model
phases (tests/loop/fakeloop.py: the real round orchestration, report, gate, capstone, archive
and promote phases), each started from a watcher trigger record, and a watcher state.

    r0001  promoted                 (from the bootstrap champion v1; → v2)
    r0002  rejected                 (train.steps=1: the challenger changes nothing)
    r0003  promoted                 (→ v3)
    r0004  refused before training  (no fresh gate slice left)

r0001's trigger detail carries the XSS canary (a string a person could put in a log or a
feature name): it reaches the ledger, the round's start record and EXPERIMENT-LOG.md.
"""

from __future__ import annotations

import time
from pathlib import Path

from tuneloop.config import load_config
from tuneloop.errors import InputError
from tuneloop.flywheel.paths import FlywheelPaths
from tuneloop.flywheel.triggers import Observations, TriggerFiring
from tuneloop.flywheel.watch import (
    AttemptEnd,
    CostEstimate,
    RoundStatus,
    RoundTrigger,
    WatchState,
    new_row,
)
from tuneloop.loop.rounds.driver import RoundRequest, execute
from tuneloop.loop.runner import Selection
from tuneloop.records import write_record

from ..loop.fakeloop import phases
from ..loop.rounds.test_driver import flywheel_config
from ..report.htmlround import CANARY

PSI = {"r0001": 0.08, "r0002": None, "r0003": 0.41, "r0004": 0.12}
ACCURACY = {"r0001": None, "r0002": 0.3, "r0003": 0.25, "r0004": 0.28}
DECISIONS = ["promoted", "rejected", "promoted", "refused"]


def trigger(round_id: str) -> RoundTrigger:
    psi, accuracy = PSI[round_id], ACCURACY[round_id]
    detail = f"{300 + int(round_id[1:])} new labelled rows (fires at 250)"
    if round_id == "r0001":
        detail += f" — {CANARY}"
    return RoundTrigger(
        round_id=round_id,
        decided_at="2026-12-01T00:00:00+00:00",
        fired=["new_labels"],
        firings=[
            TriggerFiring(name="new_labels", fired=True, value=300, threshold=250, detail=detail),
            TriggerFiring(
                name="drift", fired=False, value=psi, threshold=0.5, detail="below the bar"
            ),
        ],
        observations=Observations(
            new_labels=300,
            recent_requests=400,
            drift={"prompt_words": psi, "tag": None},
            audit_accuracy=accuracy,
            audit_upper=None if accuracy is None else accuracy + 0.06,
        ),
        since=None,
        champion_version=1,
        estimate=CostEstimate(
            eval_items=100, eval_samples=200, train_steps=100, seconds=None, seconds_basis="-"
        ),
        spend_approval=False,
    )


def _round(config: Path, round_id: str, overrides: list[str] | None) -> int:
    folder = config.parent / "triggers"
    folder.mkdir(exist_ok=True)
    path = folder / f"{round_id}.trigger.json"
    write_record(path, trigger(round_id))
    table = phases()
    request = RoundRequest(
        config, overrides, Selection(names=tuple(p.name for p in table)), round_id, path
    )
    return execute(load_config(config, overrides), request, phases=table)


def _watcher(workdir: Path) -> None:
    """The watcher's own record of the four rounds (what `tuneloop watch` would have kept)."""
    state = WatchState.open(FlywheelPaths(workdir).state)
    try:
        now = time.time()
        for i, (round_id, outcome) in enumerate(zip(PSI, DECISIONS, strict=True)):
            at = now + i
            t = trigger(round_id)
            row = new_row(t, workdir / "triggers" / f"{round_id}.json", "ready", at)
            state.create_round(row, "round", f"round {round_id} for new_labels")
            state.start_attempt(round_id, at, f"started {round_id}")
            code = {"promoted": 0, "rejected": 1, "refused": 2}[outcome]
            status: RoundStatus = "refused" if code == 2 else "finished"
            state.end_attempt(
                AttemptEnd(round_id, status, code, outcome, 0.5, at), None, f"{round_id}: {outcome}"
            )
    finally:
        state.close()


def build_world(tmp: Path) -> Path:
    """The four rounds above in `tmp`; returns the loop.yaml (ledger tmp/ledger/ledger.db)."""
    config = flywheel_config(tmp, gate_size=60)  # 192 pool items: three gate slices
    assert _round(config, "r0001", None) == 0
    assert _round(config, "r0002", ["train.steps=1"]) == 1
    assert _round(config, "r0003", None) == 0
    try:
        _round(config, "r0004", None)
    except InputError as err:
        assert "no fresh gate slice" in str(err)
    else:
        raise AssertionError("round r0004 should have been refused")
    _watcher(load_config(config).workdir)
    return config
