"""A verdict belongs to its evidence; one look per item; sealed bars; promotion last."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tuneloop.errors import InputError
from tuneloop.gate import Bar, adjudicate, approve, champion_history
from tuneloop.gate.ledger import open_ledger
from tuneloop.gate.promotion import promote, reset_one_look
from tuneloop.gate.seal import check_seal, seal_bar

from .conftest import flat, improved, item_id

IDS = [item_id(i) for i in range(200)]
GATE = IDS[100:]


def judge(champ: Path, chall: Path, tmp: Path, run_id: str, **kw):  # type: ignore[no-untyped-def]
    kw.setdefault("bar", Bar())
    kw.setdefault("item_ids", GATE)
    kw.setdefault("slice_name", "gate")
    return adjudicate(
        champ, chall, ledger_path=tmp / "l.db", out_dir=tmp / "out" / run_id, run_id=run_id, **kw
    )


def test_a_changed_challenger_never_gets_the_old_verdict(make_log, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Defect 1: the stored verdict was looked up by run id and slice, not by evidence."""
    champ = make_log("champ", flat(200, 0.0))
    strong = make_log("strong", improved(200, every=2))
    weak = make_log("weak", flat(200, 0.0))
    v = judge(champ, strong, tmp_path, "r1", promote=False)
    assert v.decision == "promote" and v.evidence is not None
    # same run id, other challenger log: refused, never the old 'promote'
    with pytest.raises(InputError, match="already has a verdict .* on other evidence"):
        judge(champ, weak, tmp_path, "r1", promote=False)
    # a new round on the same items: a second look, refused with the count
    with pytest.raises(InputError, match="100 of its 100 items were already looked at"):
        judge(champ, weak, tmp_path, "r2", promote=False)
    # the same evidence is the same look (a crash resume), whatever run id asks
    again = judge(champ, strong, tmp_path, "r1", promote=False)
    assert again.decided_at == v.decided_at and again.evidence_sha256 == v.evidence_sha256


def test_other_models_are_other_evidence(make_log, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    champ = make_log("champ", flat(200, 0.0))
    chall = make_log("chall", improved(200, every=2))
    judge(champ, chall, tmp_path, "r1", models=("a" * 64, "b" * 64))
    with pytest.raises(InputError, match="on other evidence"):
        judge(champ, chall, tmp_path, "r1", models=("a" * 64, "c" * 64))


def test_one_look_is_per_item_not_per_slice(make_log, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Defect 6: new slice fractions made a 'fresh' slice mostly of consumed items."""
    champ = make_log("champ", flat(200, 0.0))
    chall = make_log("chall", improved(200, every=2))
    judge(champ, chall, tmp_path, "r1")
    overlapping = IDS[60:160]  # 60 consumed items, 40 fresh, under a new slice name
    with pytest.raises(InputError, match="60 of its 100 items were already looked at"):
        judge(champ, chall, tmp_path, "r2", item_ids=overlapping, slice_name="gate_b")
    fresh = judge(champ, chall, tmp_path, "r3", item_ids=IDS[:100], slice_name="dev")
    assert fresh.decision == "promote"


def test_reset_is_deliberate_and_on_the_record(make_log, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    champ = make_log("champ", flat(200, 0.0))
    chall = make_log("chall", improved(200, every=2))
    other = make_log("other", improved(200, every=3))
    judge(champ, chall, tmp_path, "r1")
    with pytest.raises(InputError, match="needs a reason"):
        reset_one_look(tmp_path / "l.db", "alice", "  ")
    reset_one_look(tmp_path / "l.db", "alice", "suite re-labelled by the data team")
    v = judge(champ, other, tmp_path, "r2")
    assert v.slice_reuse is None
    log = (tmp_path / "EXPERIMENT-LOG.md").read_text()
    assert "one-look history reset by alice" in log and "re-labelled" in log
    con = sqlite3.connect(tmp_path / "l.db")
    assert con.execute("SELECT COUNT(*) FROM consumed_items").fetchone()[0] == 200  # kept


def test_sealed_bar_cannot_move(make_log, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    champ = make_log("champ", flat(200, 0.0))
    chall = make_log("chall", improved(200, every=2))
    db = tmp_path / "l.db"
    sealed = seal_bar(db, "r1", Bar(margin=0.02), "gate", GATE, "2026-11-30T00:00:00Z")
    assert seal_bar(db, "r1", Bar(margin=0.02), "gate", GATE, "later") == sealed  # idempotent
    with pytest.raises(InputError, match="was sealed at 2026-11-30T00:00:00Z"):
        seal_bar(db, "r1", Bar(margin=0.0), "gate", GATE, "later")
    with pytest.raises(InputError, match="against another bar is refused"):
        judge(champ, chall, tmp_path, "r1", bar=Bar(margin=0.0), sealed=sealed)
    with open_ledger(db) as ledger:
        check_seal(sealed, Bar(margin=0.02), "gate", GATE, ledger)
    v = judge(champ, chall, tmp_path, "r1", bar=Bar(margin=0.02), sealed=sealed)
    assert v.sealed_at == "2026-11-30T00:00:00Z" and v.decision == "promote"
    # a seal that the ledger does not hold was not made by this ledger's run
    with open_ledger(tmp_path / "other.db") as other, pytest.raises(InputError, match="is not in"):
        check_seal(sealed, Bar(margin=0.02), "gate", GATE, other)


def test_loop_promotion_happens_only_in_promote(make_log, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Defect 3: the champion pointed into an archive that did not exist yet."""
    champ = make_log("champ", flat(200, 0.0))
    chall = make_log("chall", improved(200, every=2))
    db = tmp_path / "l.db"
    v = judge(champ, chall, tmp_path, "r1", promote=False)
    assert v.decision == "promote" and v.new_champion_version is None
    assert champion_history(db) == []
    desc = {"kind": "single", "path": "/archive/r1/run/merge/model", "location": "archive"}
    p1 = promote(db, v, desc)
    p2 = promote(db, v, desc)  # resumed: finds its version again
    assert p1.champion_version == p2.champion_version == 1
    (current,) = champion_history(db)
    assert current.descriptor["path"] == "/archive/r1/run/merge/model"
    assert "promotion of run `r1`" in (tmp_path / "EXPERIMENT-LOG.md").read_text()


def test_approval_needs_the_artifact_in_place(make_log, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    champ = make_log("champ", flat(200, 0.0))
    chall = make_log("chall", improved(200, every=2))
    db = tmp_path / "l.db"
    v = judge(champ, chall, tmp_path, "r1", promote=False, require_approval=True)
    with pytest.raises(InputError, match="final place"):
        approve("r1", db)
    reject = promote(db, v, {"kind": "single", "path": "/archive/r1/model"})
    assert reject.champion_version is None and champion_history(db) == []
    assert approve("r1", db) == 1
    assert champion_history(db)[0].descriptor["path"] == "/archive/r1/model"
