"""The ledger file: a ledger written before the ledger package opens and reads as it did.

`fixtures/ledger_v3.sql` is the SQL dump of a ledger written by tuneloop before the ledger
became one typed object (commit e06d486: `gate/ledger.py`, `ledger_store.py`,
`ledger_rounds.py`): two verdicts (one sealed, one approved), three champion versions, a
reset, and three flywheel rounds whose outcome rows carry no `schema` field.
`fixtures/ledger_v3_reads.json` is what that code's reading functions returned from it.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from tuneloop.errors import InputError
from tuneloop.gate.ledger import SCHEMA_VERSION, Ledger, Round, open_ledger
from tuneloop.gate.looks import classify

FIXTURES = Path(__file__).parent / "fixtures"


def old_ledger(path: Path) -> Path:
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=WAL")  # as every ledger is
    con.executescript((FIXTURES / "ledger_v3.sql").read_text(encoding="utf-8"))
    con.close()
    return path


def _round(r: Round) -> dict[str, Any]:
    """A round as the old `ledger_rounds.rounds` returned it: the start row's keys, `outcomes`."""
    return {
        **r.start.model_dump(mode="json", exclude_unset=True),
        "outcomes": [_end(o) for o in r.outcomes],
    }


def _end(o: Any) -> dict[str, Any] | None:
    """An outcome row as stored: the record's fields that were written (no schema, no nulls
    except run_id, which every outcome row had)."""
    if o is None:
        return None
    data = o.model_dump(mode="json", exclude_none=True)
    data.pop("schema_", None)
    return {**data, "run_id": o.run_id}


def reads(ledger: Ledger, expected: dict[str, Any]) -> dict[str, Any]:
    """The typed reads in the shape of the old functions' dicts (see the module docstring)."""
    args = expected["args"]  # what the old functions were asked
    sealed = ledger.sealed("r1")
    reset = ledger.last_reset()
    current = ledger.current_champion()
    return {
        "champions": [c.to_json() for c in ledger.champions()],
        "current": current.to_json() if current else None,
        "champion_of_run": {
            r: (c.to_json() if (c := ledger.champion_of_run(r)) else None)
            for r in ("r1", "r2", "nope")
        },
        "next_version": ledger.next_champion_version(),
        "verdicts": [v.to_json() for v in ledger.verdicts()],
        "verdict": {
            r: (v.decided_at if (v := ledger.verdict(r)) else None) for r in ("r1", "r2", "nope")
        },
        "for_evidence": {
            h: (v.run_id if (v := ledger.verdict_for_evidence(h)) else None)
            for h in expected["for_evidence"]
        },
        "sealed": {"r1": sealed.to_json() if sealed else None, "nope": ledger.sealed("nope")},
        "promotable": {
            r: (p.descriptor if (p := ledger.promotable(r)) else None) for r in ("r1", "r2", "nope")
        },
        "approval": {r: (asdict(a) if (a := ledger.approval(r)) else None) for r in ("r1", "r2")},
        "last_reset": asdict(reset) if reset else None,
        "consumed_summary": [list(x) for x in ledger.consumed_summary()],
        "args": args,
        # one look per item id now, under any revision; the old reads were the first look
        "consumed_items": {
            k: [v[0].run_id, v[0].consumed_at]
            for k, v in ledger.item_looks(args["item_ids"]).items()
        },
        "consumptions": [
            asdict(c)
            for c in ledger.consumptions(args["slice"], args["revision"], args["items_sha256"])
        ],
        "rounds": [_round(r) for r in ledger.rounds()],
        "last_outcome": {
            r: _end(ledger.last_outcome(r)) for r in ("r0001", "r0002", "r0003", "r9999")
        },
    }


def test_an_old_ledger_opens_and_reads_as_before(tmp_path: Path) -> None:
    db = old_ledger(tmp_path / "old.db")
    expected = json.loads((FIXTURES / "ledger_v3_reads.json").read_text(encoding="utf-8"))
    with open_ledger(db) as ledger:  # upgraded to the current version on this first open
        got = reads(ledger, expected)
    assert json.loads(json.dumps(got)) == expected
    before = db.read_bytes()
    with open_ledger(db) as ledger:
        assert json.loads(json.dumps(reads(ledger, expected))) == expected
    assert db.read_bytes() == before  # a current file is not written to by opening it


def test_a_v3_ledger_is_upgraded_to_v6_and_its_looks_stay_consumed_by_id(tmp_path: Path) -> None:
    db = old_ledger(tmp_path / "old.db")
    with open_ledger(db) as ledger:
        assert (
            ledger.conn.execute("SELECT value FROM meta").fetchone()[0]
            == "6"
            == str(SCHEMA_VERSION)
        )
        assert ledger.spend_approval("spend-000000000000") is None  # the v5 table is there
        assert ledger.alpha_spent() == []  # and the v6 one
        hashes = ledger.conn.execute("SELECT content_sha256 FROM consumed_items").fetchall()
        assert len(hashes) == 40 and all(h[0] is None for h in hashes)  # nothing rewritten
        # an old look has no content hash: the id stays consumed whatever its content now
        status = classify({"item-0020": "any-content"}, ledger.item_looks(["item-0020"]))
        assert list(status.consumed) == ["item-0020"] and not status.fresh
        with ledger.transaction():  # and the upgraded file takes new looks with their hash
            ledger.consume_items("rev", ["new-1"], "r9", "t9", {"new-1": "h"})
        assert ledger.item_looks(["new-1"])["new-1"][0].content_sha256 == "h"


def test_the_schema_is_the_one_upgraded_old_ledgers_have(tmp_path: Path) -> None:
    """Same tables, columns and indexes whether created now or upgraded from version 3
    (ALTER TABLE words its CREATE statement differently, so the columns are compared)."""
    with open_ledger(tmp_path / "new.db"):
        pass
    old = old_ledger(tmp_path / "old.db")
    with open_ledger(old):
        pass
    assert columns_of(tmp_path / "new.db") == columns_of(old)
    assert "content_sha256" in dict(columns_of(old))["consumed_items"]


def columns_of(path: Path) -> list[tuple[str, list[str]]]:
    con = sqlite3.connect(path)
    try:
        names = [
            r[0]
            for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'index')")
        ]
        out = []
        for name in sorted(names):
            cols = [r[1] for r in con.execute(f"PRAGMA table_info({name})")]
            out.append((name, cols or [r[2] for r in con.execute(f"PRAGMA index_info({name})")]))
        return out
    finally:
        con.close()


def test_rows_written_now_read_back_the_same_way(tmp_path: Path) -> None:
    """Copy every start and outcome row of the old ledger through the new writer."""
    old = old_ledger(tmp_path / "old.db")
    with open_ledger(old) as ledger:
        rounds = ledger.rounds()
    with open_ledger(tmp_path / "new.db") as ledger, ledger.transaction():
        for r in rounds:
            ledger.add_round(r.start)
            for o in r.outcomes:
                ledger.add_outcome(o)
    con_old, con_new = sqlite3.connect(old), sqlite3.connect(tmp_path / "new.db")
    query = "SELECT round_id, started_at, parent_version, gate_slice, record FROM rounds"
    assert con_new.execute(query).fetchall() == con_old.execute(query).fetchall()
    with open_ledger(tmp_path / "new.db") as ledger:
        assert ledger.rounds() == rounds
    # outcome rows are records now: the same fields, plus their schema
    (record,) = con_new.execute(
        "SELECT record FROM round_outcomes WHERE round_id = 'r0002'"
    ).fetchone()
    assert json.loads(record)["schema"] == "tuneloop.round_outcome/1"


@pytest.mark.parametrize(
    "content", [b"not a database at all" * 100, b"SQLite format 3\x00" + b"\xff" * 200]
)
def test_a_corrupt_ledger_is_a_clear_error_and_untouched(tmp_path: Path, content: bytes) -> None:
    db = tmp_path / "l.db"
    db.write_bytes(content)
    with pytest.raises(InputError, match="not a readable tuneloop ledger"), open_ledger(db):
        pass
    assert db.read_bytes() == content


def test_a_version_1_ledger_is_upgraded_in_place(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    con = sqlite3.connect(db)
    con.executescript(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "INSERT INTO meta VALUES ('schema_version', '1');"
        "CREATE TABLE verdicts (run_id TEXT PRIMARY KEY, decided_at TEXT NOT NULL, slice TEXT "
        "NOT NULL, suite_revision TEXT NOT NULL, decision TEXT NOT NULL, record TEXT NOT NULL);"
        "INSERT INTO verdicts VALUES ('old', 't', 'gate', 'rev', 'reject', '{}');"
    )
    con.commit()
    con.close()
    with open_ledger(db) as ledger:
        assert ledger.conn.execute("SELECT value FROM meta").fetchone()[0] == str(SCHEMA_VERSION)
        assert ledger.conn.execute("SELECT evidence_sha256 FROM verdicts").fetchone()[0] is None
        ledger.conn.execute("UPDATE meta SET value = '9'")
    with pytest.raises(InputError, match="newer than this tuneloop"), open_ledger(db):
        pass
