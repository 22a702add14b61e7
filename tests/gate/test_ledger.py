from __future__ import annotations

from pathlib import Path

import pytest

from tuneloop.gate import Bar, adjudicate, champion_history, ledger, register_champion

from .conftest import flat, improved, item_id

IDS = [item_id(i) for i in range(60)]


def test_schema_wal_and_versions(tmp_path: Path) -> None:
    conn = ledger.connect(tmp_path / "l.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with ledger.transaction(conn):
        v1 = ledger.add_champion(
            conn, {"kind": "single", "path": "a"}, run_id=None, at="t", via="x"
        )
        v2 = ledger.add_champion(conn, {"kind": "single", "path": "b"}, run_id="r", at="t", via="x")
    assert (v1, v2) == (1, 2)
    assert ledger.current_champion(conn)["descriptor"]["path"] == "b"  # type: ignore[index]


def test_transaction_rolls_back_everything(tmp_path: Path) -> None:
    conn = ledger.connect(tmp_path / "l.db")
    c = ledger.Consumption("gate", "rev", "h", 3, "r1", "t")
    with pytest.raises(RuntimeError), ledger.transaction(conn):
        ledger.consume(conn, c)
        raise RuntimeError("crash")
    assert ledger.consumptions(conn, "gate", "rev", "h") == []


def test_crash_while_recording_leaves_no_trace(make_log, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    champ = make_log("champ", flat(200, 0.0))
    chall = make_log("chall", improved(200, every=2))

    def boom(*_a: object, **_k: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(ledger, "add_verdict", boom)
    kw = dict(bar=Bar(), slice_name="gate", item_ids=IDS, ledger_path=tmp_path / "l.db")
    with pytest.raises(OSError):
        adjudicate(champ, chall, out_dir=tmp_path / "o", run_id="r1", **kw)  # type: ignore[arg-type]
    conn = ledger.connect(tmp_path / "l.db")
    assert conn.execute("SELECT COUNT(*) FROM consumed_slices").fetchone()[0] == 0
    assert champion_history(tmp_path / "l.db") == []
    assert not (tmp_path / "o").exists() and not (tmp_path / "EXPERIMENT-LOG.md").exists()
    monkeypatch.undo()
    # the slice was never consumed, so the round can run again
    v = adjudicate(champ, chall, out_dir=tmp_path / "o", run_id="r1", **kw)  # type: ignore[arg-type]
    assert v.decision == "promote" and v.new_champion_version == 1


def test_registered_base_is_named_by_the_next_verdict(make_log, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = tmp_path / "l.db"
    assert register_champion(db, {"kind": "single", "path": "/base"}, run_id=None) == 1
    log = make_log("champ", flat(200, 0.0))
    v = adjudicate(
        log,
        log,
        bar=Bar(),
        slice_name="gate",
        item_ids=IDS,
        ledger_path=db,
        out_dir=tmp_path / "o",
        run_id="r1",
    )
    assert v.champion_version == 1 and v.decision == "reject"
    assert "Champion (v1)" in (tmp_path / "EXPERIMENT-LOG.md").read_text()
