"""The watcher's state file: one written before the shared SQLite helper opens and reads as it did.

`fixtures/flywheel_v1.sql` is the SQL dump of a `flywheel.db` written by tuneloop before the
ledger and the watch state shared `tuneloop.records.sqlite` (commit e06d486): one round
approved and started, four decisions, the pacing. `fixtures/flywheel_v1_reads.json` is what
that code's `WatchState` read from it.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict
from pathlib import Path

import pytest

from tuneloop.errors import InputError
from tuneloop.flywheel.watch import WatchState

FIXTURES = Path(__file__).parent / "fixtures"


def old_state(path: Path) -> Path:
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=WAL")
    con.executescript((FIXTURES / "flywheel_v1.sql").read_text(encoding="utf-8"))
    con.close()
    return path


def test_an_old_state_file_opens_and_reads_as_before(tmp_path: Path) -> None:
    db = old_state(tmp_path / "flywheel.db")
    before = db.read_bytes()
    state = WatchState.open(db, create=False)
    try:
        got = {
            "rounds": [
                {**asdict(r), "trigger": r.trigger.to_json(), "trigger_file": str(r.trigger_file)}
                for r in state.rounds(100)
            ],
            "decisions": [asdict(d) for d in state.decisions(100)],
            "pacing": state.pacing().model_dump(mode="json"),
        }
    finally:
        state.close()
    expected = json.loads((FIXTURES / "flywheel_v1_reads.json").read_text(encoding="utf-8"))
    assert json.loads(json.dumps(got)) == expected
    assert db.read_bytes() == before


def test_the_schema_is_the_one_old_state_files_have(tmp_path: Path) -> None:
    WatchState.open(tmp_path / "new.db").close()

    def schema(path: Path) -> list[tuple[str, str]]:
        con = sqlite3.connect(path)
        try:
            return con.execute("SELECT name, sql FROM sqlite_master ORDER BY name").fetchall()
        finally:
            con.close()

    assert schema(tmp_path / "new.db") == schema(old_state(tmp_path / "old.db"))


def test_open_errors_name_the_state_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no flywheel state here"):
        WatchState.open(tmp_path / "none.db", create=False)
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"not a database at all" * 100)
    with pytest.raises(InputError, match=r"bad\.db: not a readable flywheel state .*move it aside"):
        WatchState.open(bad)
    newer = old_state(tmp_path / "newer.db")
    con = sqlite3.connect(newer)
    con.execute("UPDATE meta SET value = '7' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    with pytest.raises(InputError, match=r"flywheel state version 7 is newer .* reads \(1\)"):
        WatchState.open(newer)
