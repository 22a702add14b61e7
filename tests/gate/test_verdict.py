from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from tuneloop.errors import InputError
from tuneloop.gate import Bar, adjudicate, approve, champion_history, register_champion
from tuneloop.gate.verdict import GateVerdict, preregistration_warnings
from tuneloop.records import read_record

from .conftest import flat, improved, item_id

pytestmark = pytest.mark.filterwarnings("ignore")
IDS = [item_id(i) for i in range(0, 200, 2)] + [item_id(i) for i in range(1, 200, 2)]
SLICE = sorted(IDS)[:90]


def run(champ: Path, chall: Path, tmp: Path, run_id: str, **kw):  # type: ignore[no-untyped-def]
    kw.setdefault("bar", Bar())
    kw.setdefault("item_ids", SLICE)
    kw.setdefault("slice_name", "gate")
    return adjudicate(
        champ,
        chall,
        ledger_path=tmp / "ledger.db",
        out_dir=tmp / "out" / run_id,
        run_id=run_id,
        **kw,
    )


def snapshot(tmp: Path) -> dict[str, str]:
    """Hashes of every file under tmp/ (ledger, WAL, verdicts, experiment log)."""
    return {
        str(p.relative_to(tmp)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(tmp.rglob("*"))
        if p.is_file() and "-shm" not in p.name
    }


def test_aa_is_rejected_and_recorded(make_log, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    log = make_log("champ", improved(200))
    v = run(log, log, tmp_path, "r1")
    assert v.decision == "reject" and v.new_champion_version is None
    assert v.stats["delta"] == 0 and v.stats["p_value"] == 1.0
    on_disk = read_record(tmp_path / "out" / "r1" / "verdict.json", GateVerdict)
    assert on_disk == v
    assert on_disk.to_json()["schema"] == "tuneloop.verdict/2"
    text = (tmp_path / "EXPERIMENT-LOG.md").read_text()
    assert "run `r1` — **reject**" in text and "Slice consumed: slice `gate`" in text
    assert champion_history(tmp_path / "ledger.db") == []


def test_promotion_creates_a_champion_version(make_log, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    champ = make_log("champ", flat(200, 0.0))
    chall = make_log("chall", improved(200, every=2))
    desc = {"kind": "single", "path": "/runs/r1/merged", "sha256": "ab" * 32, "archive": "/arch/r1"}
    v = run(champ, chall, tmp_path, "r1", challenger_descriptor=desc, bar=Bar(margin=0.1))
    assert v.decision == "promote" and v.new_champion_version == 1 and v.reasons == []
    (current,) = champion_history(tmp_path / "ledger.db")
    assert current.version == 1 and current.run_id == "r1"
    assert current.descriptor["path"] == "/runs/r1/merged"
    assert current.descriptor["archive"] == "/arch/r1"
    # the next round names the champion in service
    champ2 = make_log("champ2", improved(200, every=2))
    v2 = run(champ2, chall, tmp_path, "r2", item_ids=sorted(IDS)[90:], slice_name="gate2")
    assert v2.champion_version == 1 and v2.decision == "reject"


def test_consumed_slice_is_refused_and_nothing_changes(make_log, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    champ = make_log("champ", flat(200, 0.0))
    chall = make_log("chall", improved(200, every=2))
    other = make_log("other", improved(200, every=3))
    run(champ, chall, tmp_path, "r1")
    before = snapshot(tmp_path)
    with pytest.raises(InputError, match=r"90 of its 90 items were already looked at .*runs r1"):
        run(champ, other, tmp_path, "r2")
    # the same items under another name are the same look
    with pytest.raises(InputError, match="already looked at"):
        adjudicate(
            champ,
            other,
            bar=Bar(),
            slice_name="renamed",
            item_ids=SLICE,
            ledger_path=tmp_path / "ledger.db",
            out_dir=tmp_path / "o",
            run_id="r3",
        )
    assert snapshot(tmp_path) == before


def test_allowed_reuse_is_recorded(make_log, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    champ = make_log("champ", flat(200, 0.0))
    chall = make_log("chall", improved(200, every=2))
    run(champ, chall, tmp_path, "r1")
    other = make_log("other", improved(200, every=3))
    v = run(champ, other, tmp_path, "r2", allow_slice_reuse=True)
    assert v.slice_reuse is not None and v.slice_reuse.previous_runs == ["r1"]
    assert "**reused**" in (tmp_path / "EXPERIMENT-LOG.md").read_text()
    con = sqlite3.connect(tmp_path / "ledger.db")
    rows = con.execute("SELECT run_id, reuse_allowed FROM consumed_slices ORDER BY id").fetchall()
    assert rows == [("r1", 0), ("r2", 1)]


def test_same_run_id_resumes_without_a_second_look(make_log, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    champ = make_log("champ", flat(200, 0.0))
    chall = make_log("chall", improved(200, every=2))
    v1 = run(champ, chall, tmp_path, "r1")
    (tmp_path / "out" / "r1" / "verdict.json").unlink()  # crash before the files were written
    v2 = run(champ, chall, tmp_path, "r1")
    assert v2 == v1 and (tmp_path / "out" / "r1" / "verdict.json").exists()
    assert (tmp_path / "EXPERIMENT-LOG.md").read_text().count("run `r1`") == 1
    assert len(champion_history(tmp_path / "ledger.db")) == 1
    with pytest.raises(InputError, match="already has a verdict"):
        run(champ, chall, tmp_path, "r1", item_ids=sorted(IDS)[90:], slice_name="gate2")


def test_approval_flow(make_log, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    champ = make_log("champ", flat(200, 0.0))
    chall = make_log("chall", improved(200, every=2))
    v = run(champ, chall, tmp_path, "r1", require_approval=True)
    assert v.decision == "awaiting_approval" and champion_history(tmp_path / "ledger.db") == []
    assert approve("r1", tmp_path / "ledger.db") == 1
    (current,) = champion_history(tmp_path / "ledger.db")
    assert current.via == "approval" and current.descriptor["model"] == "chall"
    assert "approval of run `r1`" in (tmp_path / "EXPERIMENT-LOG.md").read_text()
    with pytest.raises(InputError, match="already approved"):
        approve("r1", tmp_path / "ledger.db")
    with pytest.raises(InputError, match="no verdict"):
        approve("nope", tmp_path / "ledger.db")


def test_rejected_verdict_cannot_be_approved(make_log, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    log = make_log("champ", flat(200, 0.0))
    run(log, log, tmp_path, "r1", require_approval=True)
    with pytest.raises(InputError, match="only an 'awaiting_approval'"):
        approve("r1", tmp_path / "ledger.db")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"temperature": 0.0}, "different sampling budgets.*temperature: 0.7 vs 0.0"),
        ({"n_samples": 3}, "n_samples: 2 vs 3"),
        ({"revision_": "f" * 64}, "different suite revisions"),
        ({"item_ids": [item_id(i) for i in range(100, 200)]}, "items were not evaluated"),
    ],
)
def test_incomparable_logs_are_refused(make_log, tmp_path: Path, kwargs, message) -> None:  # type: ignore[no-untyped-def]
    champ = make_log("champ", flat(200, 0.0))
    n = 100 if "item_ids" in kwargs else 200
    scores = [[0.0] * kwargs.get("n_samples", 2) for _ in range(n)]
    other = make_log("other", scores, **kwargs)
    with pytest.raises(InputError, match=message):
        run(champ, other, tmp_path, "r1")
    assert not (tmp_path / "ledger.db").exists() and not (tmp_path / "out").exists()


def test_missing_samples_count_against_the_arm(make_log, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    champ = make_log("champ", flat(200, 0.0))
    scores = improved(200, every=2)
    for i in range(0, 200, 10):
        scores[i] = [None, 1.0]  # 20 of 400 samples missing: 5%
    chall = make_log("chall", scores)
    v = run(champ, chall, tmp_path, "r1")
    assert v.decision == "reject"
    assert any(r.startswith("challenger:") and "unscored" in r for r in v.reasons)
    assert 0.03 < v.challenger.missing_fraction < 0.08


def test_pass_at_k_bar_needs_enough_samples(make_log, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    log = make_log("champ", flat(200, 0.0))
    with pytest.raises(InputError, match="k = 3 but the logs have only 2 samples"):
        run(log, log, tmp_path, "r1", bar=Bar(metric="pass_at_k", k=3))
    assert not (tmp_path / "ledger.db").exists()
    v = run(log, log, tmp_path, "r1", bar=Bar(metric="pass_at_k", k=2))
    assert v.decision == "reject" and v.bar["metric"] == "pass_at_k"


def test_bad_descriptor_is_refused(make_log, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    log = make_log("champ", flat(200, 0.0))
    with pytest.raises(InputError, match="cascade descriptor needs at least one component"):
        run(log, log, tmp_path, "r1", challenger_descriptor={"kind": "cascade"})
    with pytest.raises(InputError, match="descriptor kind"):
        run(log, log, tmp_path, "r1", challenger_descriptor={"kind": "ensemble", "path": "x"})


def test_bar_fixed_after_the_post_eval_is_flagged(make_log, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    champ = make_log("champ", flat(200, 0.0))
    chall = make_log("chall", improved(200, every=2), started_at="2026-01-02T00:00:00Z")
    v = run(champ, chall, tmp_path, "r1", bar_registered_at="2026-01-03T00:00:00Z")
    assert v.decision == "promote"  # a warning, not a condition
    assert v.warnings and "not pre-registered" in v.warnings[0]
    assert "Warning: the bar was fixed" in (tmp_path / "EXPERIMENT-LOG.md").read_text()
    assert preregistration_warnings("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z") == []
    assert preregistration_warnings(None, "2026-01-02T00:00:00Z") == []


def test_registered_base_is_named_by_the_next_verdict(make_log, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = tmp_path / "l.db"
    assert register_champion(db, {"kind": "single", "path": "/base"}, run_id=None) == 1
    log = make_log("champ", flat(200, 0.0))
    v = adjudicate(
        log,
        log,
        bar=Bar(),
        slice_name="gate",
        item_ids=[item_id(i) for i in range(60)],
        ledger_path=db,
        out_dir=tmp_path / "o",
        run_id="r1",
    )
    assert v.champion_version == 1 and v.decision == "reject"
    assert "Champion (v1)" in (tmp_path / "EXPERIMENT-LOG.md").read_text()
