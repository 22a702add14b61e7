"""The ledger as one object: one open/close, transactions, typed rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuneloop.gate import Bar, adjudicate, champion_history
from tuneloop.gate.ledger import (
    Champion,
    Consumption,
    ItemChange,
    ItemLook,
    Ledger,
    RevisionLooks,
    open_ledger,
)

from ..conftest import flat, improved, item_id

IDS = [item_id(i) for i in range(60)]


def test_one_open_wal_and_typed_champions(tmp_path: Path) -> None:
    with open_ledger(tmp_path / "l.db") as ledger:
        assert ledger.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        with ledger.transaction():
            v1 = ledger.add_champion({"kind": "single", "path": "a"}, run_id=None, at="t", via="x")
            v2 = ledger.add_champion({"kind": "single", "path": "b"}, run_id="r", at="u", via="y")
        assert (v1, v2) == (1, 2)
        b = Champion(2, "r", "u", "y", {"kind": "single", "path": "b"})
        assert ledger.current_champion() == b
        assert [c.version for c in ledger.champions()] == [1, 2]
        assert ledger.champion_of_run("r") == ledger.current_champion()
        assert ledger.champion_of_run("nope") is None
        assert ledger.next_champion_version() == 3
    with pytest.raises(Exception, match="closed"):
        ledger.champions()  # the block closed it


def test_transaction_rolls_back_everything(tmp_path: Path) -> None:
    c = Consumption("gate", "rev", "h", 3, "r1", "t")
    with open_ledger(tmp_path / "l.db") as ledger:
        with pytest.raises(RuntimeError), ledger.transaction():
            ledger.consume(c)
            ledger.consume_items("rev", ["a", "b"], "r1", "t")
            raise RuntimeError("crash")
        assert ledger.consumptions("gate", "rev", "h") == []
        assert ledger.item_looks(["a"]) == {}


def test_looks_are_typed_and_a_reset_stops_them_counting(tmp_path: Path) -> None:
    with open_ledger(tmp_path / "l.db") as ledger, ledger.transaction():
        ledger.consume(Consumption("gate", "rev", "h", 2, "r1", "t1"))
        ledger.consume_items("rev", ["a", "b"], "r1", "t1")
        ledger.consume_items("rev", ["b", "c"], "r2", "t2")
    with open_ledger(tmp_path / "l.db") as ledger:
        seen = ledger.item_looks(["a", "b", "z"])
        assert seen == {
            "a": [ItemLook("r1", "t1", None, "rev")],
            "b": [ItemLook("r1", "t1", None, "rev"), ItemLook("r2", "t2", None, "rev")],
        }
        assert list(ledger.item_looks(["b"], except_run="r1")["b"]) == [seen["b"][1]]
        assert ledger.consumed_summary() == [RevisionLooks("rev", 3, 2)]
        assert ledger.consumptions("other", "rev2", "h")[0].run_id == "r1"  # same item set
        assert ledger.last_reset() is None
        with ledger.transaction():
            ledger.add_reset("t3", "alice", "why")
        reset = ledger.last_reset()
        assert reset is not None and (reset.who, reset.items_upto, reset.slices_upto) == (
            "alice",
            4,
            1,
        )
        assert ledger.item_looks(["a"]) == {} and ledger.consumed_summary() == []
        assert ledger.consumptions("gate", "rev", "h") == []


def test_approvals_and_promotables_are_typed(tmp_path: Path) -> None:
    with open_ledger(tmp_path / "l.db") as ledger, ledger.transaction():
        ledger.add_promotable("r1", {"kind": "single", "path": "/x"}, "t")
        ledger.add_promotable("r1", {"kind": "single", "path": "/other"}, "later")  # ignored
        ledger.add_approval("r1", "t2", 4)
        final = ledger.promotable("r1")
        assert final is not None and final.descriptor == {"kind": "single", "path": "/x"}
        approval = ledger.approval("r1")
        assert approval is not None and approval.champion_version == 4
        assert ledger.promotable("r2") is None and ledger.approval("r2") is None


def test_verdicts_come_back_as_records(make_log, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    champ = make_log("champ", flat(200, 0.0))
    chall = make_log("chall", improved(200, every=2))
    v = adjudicate(
        champ,
        chall,
        bar=Bar(),
        slice_name="gate",
        item_ids=IDS,
        ledger_path=tmp_path / "l.db",
        out_dir=tmp_path / "o",
        run_id="r1",
    )
    with open_ledger(tmp_path / "l.db") as ledger:
        assert ledger.verdict("r1") == v
        assert ledger.verdicts() == [v]
        assert v.evidence_sha256 and ledger.verdict_for_evidence(v.evidence_sha256) == v
        assert ledger.verdict("r2") is None and ledger.verdict_for_evidence("x") is None


def test_a_changed_row_is_an_error_naming_the_ledger(tmp_path: Path) -> None:
    from tuneloop.errors import InputError

    with open_ledger(tmp_path / "l.db") as ledger:
        ledger.conn.execute(
            "INSERT INTO champions VALUES (1, NULL, 't', 'x', '[1, 2]')"
        )  # not an object
        with pytest.raises(InputError, match=r"l\.db: champion v1: descriptor is a JSON list"):
            ledger.champions()


def test_crash_while_recording_leaves_no_trace(make_log, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    champ = make_log("champ", flat(200, 0.0))
    chall = make_log("chall", improved(200, every=2))

    def boom(*_a: object, **_k: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(Ledger, "add_verdict", boom)
    kw = dict(bar=Bar(), slice_name="gate", item_ids=IDS, ledger_path=tmp_path / "l.db")
    with pytest.raises(OSError):
        adjudicate(champ, chall, out_dir=tmp_path / "o", run_id="r1", **kw)  # type: ignore[arg-type]
    with open_ledger(tmp_path / "l.db") as ledger:
        assert ledger.conn.execute("SELECT COUNT(*) FROM consumed_slices").fetchone()[0] == 0
    assert champion_history(tmp_path / "l.db") == []
    assert not (tmp_path / "o").exists() and not (tmp_path / "EXPERIMENT-LOG.md").exists()
    monkeypatch.undo()
    # the slice was never consumed, so the round can run again
    v = adjudicate(champ, chall, out_dir=tmp_path / "o", run_id="r1", **kw)  # type: ignore[arg-type]
    assert v.decision == "promote" and v.new_champion_version == 1


def test_a_look_is_kept_per_id_across_revisions_with_its_content_hash(tmp_path: Path) -> None:
    change = ItemChange("a", "h1", "h2", "rev2", "r2", "t2", "declared")
    with open_ledger(tmp_path / "l.db") as ledger, ledger.transaction():
        ledger.consume_items("rev1", ["a", "b"], "r1", "t1", {"a": "h1", "b": "hb"})
        ledger.add_item_changes([change])
    with open_ledger(tmp_path / "l.db") as ledger:
        # asked without a revision: a look under rev1 holds under every later one
        assert ledger.item_looks(["a"]) == {"a": [ItemLook("r1", "t1", "h1", "rev1")]}
        assert [(i, x.content_sha256) for i, x in ledger.consumed_rows()] == [
            ("a", "h1"),
            ("b", "hb"),
        ]
        assert ledger.item_changes() == [change]
