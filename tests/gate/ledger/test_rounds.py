"""A round's start and outcome rows: written and read typed; the last outcome in one place."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuneloop.errors import InputError
from tuneloop.gate.ledger import (
    AuditFigures,
    RoundOutcome,
    RoundStart,
    last_outcome,
    open_ledger,
)
from tuneloop.loop.rounds import RoundRecord


def test_the_start_row_holds_every_field_of_round_json() -> None:
    """`RoundStart` reads the `RoundRecord` the loop writes (whose dump names it `schema_`)."""
    assert set(RoundRecord.model_fields) <= set(RoundStart.model_fields)
    record = RoundRecord(
        round_id="r0001",
        started_at="t",
        config_path="fly.yaml",
        parent_version=1,
        parent={"kind": "single", "path": "/m"},
        base_model="/m",
        gate_slice="gate-000",
        eval_slice="audit+gate-000",
    )
    start = RoundStart.of(record)
    assert start.model_dump(mode="json", exclude_unset=True) == record.model_dump(mode="json")


def test_outcomes_are_records_and_the_last_one_is_the_state(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    assert last_outcome(db, "r0001") is None and not db.exists()  # never created
    assert last_outcome(None, "r0001") is None
    start = RoundStart(round_id="r0001", started_at="t0", gate_slice="gate-000")
    audit = AuditFigures(n_items=3, pre=0.5, post=0.6, delta=0.1, ci=(0.0, 0.2), p_two_sided=0.3)
    first = RoundOutcome(round_id="r0001", ended_at="t1", outcome="interrupted", run_id="x")
    second = RoundOutcome(round_id="r0001", ended_at="t2", outcome="promoted", audit=audit)
    with open_ledger(db) as ledger, ledger.transaction():
        ledger.add_round(start)
        ledger.add_round(start.model_copy(update={"gate_slice": "other"}))  # a no-op
        ledger.add_outcome(first)
        ledger.add_outcome(second)
        ledger.add_outcome(RoundOutcome(round_id="r0009", ended_at="t", outcome="failed"))
    with open_ledger(db) as ledger:
        (only,) = ledger.rounds()
        assert only.start == start and only.outcomes == [first, second] and only.last == second
        assert ledger.last_outcome("r0009") is None  # an outcome without a start is no round's
    assert last_outcome(db, "r0001") == second
    assert last_outcome(db, "r0002") is None


def test_an_outcome_of_another_kind_or_newer_version_is_refused(tmp_path: Path) -> None:
    with open_ledger(tmp_path / "l.db") as ledger, ledger.transaction():
        ledger.add_round(RoundStart(round_id="r0001", started_at="t0", gate_slice=""))
        ledger.conn.execute(
            "INSERT INTO round_outcomes (round_id, ended_at, outcome, record) VALUES "
            """('r0001', 't', 'failed', '{"schema": "tuneloop.round_outcome/9"}')"""
        )
        with pytest.raises(InputError, match=r"round 'r0001': record version .* is newer"):
            ledger.rounds()


def test_an_unknown_start_field_is_an_error_naming_the_ledger(tmp_path: Path) -> None:
    with open_ledger(tmp_path / "l.db") as ledger, ledger.transaction():
        ledger.conn.execute(
            "INSERT INTO rounds (round_id, started_at, gate_slice, record) VALUES "
            """('r0001', 't', '', '{"round_id": "r0001", "started_at": "t", "gate_slice": "",
            "surprise": 1}')"""
        )
        with pytest.raises(InputError, match=r"l\.db: round 'r0001': field 'surprise'"):
            ledger.rounds()
