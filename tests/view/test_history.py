"""What the dashboard reads from a ledger and its runs (view/history.py, view/sources.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tuneloop.config import load_config
from tuneloop.errors import InputError
from tuneloop.gate.explog import log_path
from tuneloop.loop.layout import ledger_path
from tuneloop.view.history import gather, trigger_text
from tuneloop.view.sources import from_ledger, resolve

from ..loop.fakeloop import runner, write_config
from ..report.htmlround import CANARY
from .world import DECISIONS, PSI


def test_rounds_decisions_and_lineage(world: Path) -> None:
    d = gather(resolve(world, None))
    assert [r.key for r in d.rounds] == ["r0001", "r0002", "r0003", "r0004"]
    assert [r.decision for r in d.rounds] == DECISIONS
    assert d.rounds[3].decision_text == "refused before training"
    assert "no fresh gate slice" in d.rounds[3].reason
    r1, r2, r3, r4 = d.rounds
    assert (r1.parent_version, r1.from_bootstrap, r1.gate_slice) == (1, True, "gate-000")
    assert (r2.parent_version, r2.from_bootstrap, r3.parent_version) == (2, False, 2)
    assert (r1.new_champion, r2.new_champion, r3.new_champion) == (2, None, 3)
    # the gate verdicts are the ledger's, typed; the refused round never reached the gate
    assert r1.verdict is not None and r1.verdict.decision == "promote"
    assert r2.verdict is not None and r2.verdict.reasons
    assert r4.verdict is None and r4.run_id is None and r4.report is None
    assert CANARY in r1.trigger and r2.trigger.startswith("new_labels: 302")


def test_delta_audit_and_drift_per_round(world: Path) -> None:
    d = gather(resolve(world, None))
    r1, r2, _, r4 = d.rounds
    assert r1.delta is not None and r1.audit is not None
    assert r1.delta.where == "audit part" and r1.delta.n_items == r1.audit.n_items == 48
    assert r1.delta.low <= r1.delta.delta <= r1.delta.high
    assert r1.delta.delta == pytest.approx(r1.audit.post - r1.audit.pre)
    assert r2.delta is not None and r2.delta.delta == 0.0  # the weak challenger changes nothing
    assert r4.delta is None and r4.audit is None
    looks = [r.look.drift["prompt_words"] if r.look else "none" for r in d.rounds]
    assert looks == list(PSI.values())


def test_champions_log_reports_and_watcher(world: Path) -> None:
    sources = resolve(world, None)
    d = gather(sources)
    assert [(c.version, c.via, c.until is None) for c in d.champions] == [
        (1, "bootstrap", False),
        (2, "gate", False),
        (3, "gate", True),
    ]
    assert d.champions[1].run_id == d.rounds[0].run_id
    text = log_path(sources.ledger).read_text()
    assert len(d.log) == text.count("<!-- tuneloop:") == 9
    assert [e.kind for e in d.log].count("round") == 4
    assert all(e.heading and e.bullets for e in d.log)
    # each run's report is its archive's copy
    for r in d.rounds[:3]:
        assert r.report is not None and r.run_id is not None
        archive = world.parent / "archive" / r.run_id
        assert r.report.path == archive / "run" / "capstone" / "report.html"
        assert r.report.path.is_file() and r.report.href == f"runs/{r.run_id}/report.html"
    assert d.watcher is not None
    assert [w.round_id for w in d.watcher.rounds] == ["r0001", "r0002", "r0003", "r0004"]
    assert d.watcher.decisions[-1].message == "r0004: refused"


def test_a_ledger_alone_reads_without_config_or_watcher(world: Path) -> None:
    ledger = ledger_path(load_config(world))
    d = gather(resolve(None, ledger))
    assert [r.decision for r in d.rounds] == DECISIONS
    assert d.watcher is None  # no workdir to find it in
    # the world's archives are not beside its ledger: no report is guessed
    assert all(r.report is None for r in d.rounds)
    assert from_ledger(ledger).archive_roots == (ledger.parent, ledger.parent / "archive")


def test_a_plain_loop_run_is_its_own_entry(tmp_path: Path) -> None:
    config = write_config(tmp_path)  # no rounds: one `tuneloop run` and its gate verdict
    runner(config).run()
    d = gather(resolve(config, None))
    assert len(d.rounds) == 1
    (run,) = d.rounds
    assert run.key == run.run_id and run.decision == "promoted" and run.new_champion == 1
    assert run.delta is not None and run.delta.where == "report slice"  # its delta.json
    assert run.report is not None and run.report.path.is_file()
    # the workdir's copy counts only while its state names the same run
    shutil.rmtree(tmp_path / "archive")
    again = gather(resolve(config, None)).rounds[0]
    assert again.report is not None and again.report.path == tmp_path / "work" / "capstone" / (
        "report.html"
    )


def test_missing_or_odd_ledgers_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="name the loop"):
        resolve(None, None)
    with pytest.raises(InputError, match="no ledger here"):
        resolve(None, tmp_path / "ledger.db")
    with pytest.raises(InputError, match="is a folder"):
        resolve(None, tmp_path)
    junk = tmp_path / "junk.db"
    junk.write_text("not sqlite at all, just text\n" * 100)
    with pytest.raises(InputError, match="not a readable tuneloop ledger"):
        gather(resolve(None, junk))
    assert junk.read_text().startswith("not sqlite")


def test_trigger_words() -> None:
    assert trigger_text({}) == "manual (no trigger file)"
    assert trigger_text({"reason": "nightly"}) == "reason nightly"
