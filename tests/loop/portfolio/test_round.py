"""A portfolio round on the fake phase table (tests/loop/fakeloop.py): the real challengers
phase, selection, hand-over, gate, archive and promote; fake training and evaluation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.loop import fakeloop
from tuneloop.errors import AwaitingApproval, InputError
from tuneloop.gate.ledger import open_ledger
from tuneloop.gate.seal import seal_selection
from tuneloop.loop.layout import RunLayout, slice_ids
from tuneloop.loop.state import load_state
from tuneloop.records import read_record
from tuneloop.records.selection import PortfolioRecord
from tuneloop.samplelog import EvalSummary

SLICES = {"dev": 0.25, "validation": 0.25, "gate": 0.5}


def portfolio(**extra: Any) -> dict[str, Any]:
    return {
        "challengers": [
            {"name": "weak", "overrides": {"train.steps": 50}, "default": True},
            {"name": "s150", "overrides": {"train.steps": 150}},
            {"name": "s200", "overrides": {"train.steps": 200}},
        ],
        "budget": {"max_seconds": 100, "seconds_per_step": 0.1},
    } | extra


def config(tmp_path: Path, pf: dict[str, Any] | None = None, **gate: Any) -> Path:
    return fakeloop.write_config(
        tmp_path,
        suite={"slices": SLICES},
        portfolio=pf or portfolio(),
        gate=gate,
    )


def run(path: Path) -> Any:
    fakeloop.CALLS.clear()
    return fakeloop.runner(path).run()


def record(tmp_path: Path, round_id: str | None = None) -> PortfolioRecord:
    run = RunLayout(tmp_path / "work")
    run = run.round(round_id) if round_id else run
    return read_record(run.portfolio_record, PortfolioRecord)


def test_the_rule_picks_on_validation_and_only_the_choice_meets_the_gate(tmp_path: Path) -> None:
    path = config(tmp_path)
    state = run(path)
    rec = record(tmp_path)
    # every strong challenger beats the weak default on validation; the two tie on their mean,
    # so the cheaper (150 steps × 0.1 s) is chosen
    assert rec.selected == "s150"
    assert [r.selected for r in rec.challengers] == [False, True, False]
    assert rec.decision is not None and rec.decision.default == "weak"
    pair = next(p for p in rec.decision.pairs if p.candidate == "s150")
    assert pair.beats_default and pair.losses == 0 and pair.wins > 0
    why = {r.name: r.why for r in rec.challengers}
    assert why["s200"] == (
        "not selected: beats 'weak' too, but 's150' ranks ahead (higher mean, then cheaper)"
    )
    assert why["s150"].startswith("selected: ")
    assert rec.estimate_seconds == pytest.approx((50 + 150 + 200) * 0.1)
    assert rec.approval == "not required"
    # no challenger's own evaluation saw a gate item: the validation slice only
    from tuneloop.config import load_config

    cfg = load_config(path)
    validation, gate = set(slice_ids(cfg, "validation")), set(slice_ids(cfg, "gate"))
    for row in rec.challengers:
        summary = read_record(RunLayout(Path(row.workdir)).post_summary, EvalSummary)
        assert set(summary.item_ids) == validation and not set(summary.item_ids) & gate
    # the round's own challenger is the selected one's adapter, copied; then gated once
    work = RunLayout(tmp_path / "work")
    assert (work.adapter / "steps.txt").read_text() == "150"
    assert state.phases["promote"].status == "done"
    with open_ledger(cfg.gate.ledger) as ledger:  # type: ignore[arg-type]
        verdict = ledger.verdict(state.run_id)
        champion = ledger.current_champion()
    assert verdict is not None and verdict.decision == "promote"
    assert verdict.adjudication is not None
    assert verdict.adjudication["rule"] == "selected" and verdict.adjudication["challengers"] == 3
    assert champion is not None and champion.descriptor["recipe"]["train"]["steps"] == 150
    assert champion.descriptor["recipe"]["challenger"] == "s150"
    # the archive keeps every challenger's adapter and validation log, not its merged model
    (archived,) = (tmp_path / "archive").iterdir()
    for name in ("weak", "s150", "s200"):
        kept = RunLayout(archived / "run" / "challengers" / name)
        assert (kept.adapter / "steps.txt").is_file() and kept.post_summary.is_file()
        assert not kept.merged_model.exists() and not kept.lock.exists()
    from tuneloop.archive import verify_archive

    assert verify_archive(archived) == []
    log = (tmp_path / "ledger" / "EXPERIMENT-LOG.md").read_text()
    assert "Challengers" in log and "s200" in log and "weak" in log


def test_a_failed_challenger_is_recorded_and_skipped(tmp_path: Path) -> None:
    pf = portfolio()
    pf["challengers"][2] = {"name": "broken", "overrides": {"train.steps": fakeloop.FAILING_STEPS}}
    run(config(tmp_path, pf))
    rec = record(tmp_path)
    broken = next(r for r in rec.challengers if r.name == "broken")
    assert broken.status == "failed" and "diverged" in (broken.error or "")
    assert rec.selected == "s150"


def test_a_budget_too_small_is_refused_before_any_compute(tmp_path: Path) -> None:
    pf = portfolio(budget={"max_seconds": 30, "seconds_per_step": 0.1})
    path = config(tmp_path, pf)
    fakeloop.CALLS.clear()
    with pytest.raises(InputError, match="portfolio.budget.max_seconds.*40 s"):
        fakeloop.runner(path).run()
    assert fakeloop.CALLS == [] and not (tmp_path / "work" / "eval_pre").exists()


def test_spend_waits_for_a_person_then_runs(tmp_path: Path) -> None:
    from tuneloop.config import load_config
    from tuneloop.loop.portfolio import approve_spend, estimate_round
    from tuneloop.loop.portfolio.run import portfolio_challengers
    from tuneloop.loop.state import now_iso

    path = config(tmp_path, portfolio(approval={"spend": True}))
    fakeloop.CALLS.clear()
    with pytest.raises(AwaitingApproval, match=r"tuneloop approve (spend-[0-9a-f]{12})") as err:
        fakeloop.runner(path).run()
    assert fakeloop.CALLS == []
    key = str(err.value).rsplit("approve ", 1)[1].split()[0]
    cfg = load_config(path)
    challengers = portfolio_challengers(cfg)
    found = estimate_round(cfg, challengers)
    with pytest.raises(InputError, match="the config's spend is now"):
        approve_spend(cfg, challengers, found, "spend-000000000000", now_iso())
    approve_spend(cfg, challengers, found, key, now_iso())
    run(path)
    assert record(tmp_path).approval.startswith("by ")


def test_a_standing_approval_covers_a_round_under_it_and_says_so(tmp_path: Path) -> None:
    standing = {"spend": {"standing": {"max_seconds": 60}}}
    run(config(tmp_path, portfolio(approval=standing)))
    assert record(tmp_path).approval.startswith("standing (≤ 60 s)")
    with open_ledger(tmp_path / "ledger" / "ledger.db") as ledger:
        rows = ledger.conn.execute("SELECT how FROM spend_approvals").fetchall()
    assert [r["how"] for r in rows] == ["standing (≤ 60 s)"]
    over = {"spend": {"standing": {"max_seconds": 10}}}
    (tmp_path / "b").mkdir()
    with pytest.raises(AwaitingApproval, match="over the standing approval"):
        fakeloop.runner(config(tmp_path / "b", portfolio(approval=over))).run()


def test_the_selection_rule_cannot_change_once_sealed(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    seal_selection(db, "r1", {"rule": "default_stays"}, "validation", ["a", "b"], "t0")
    seal_selection(db, "r1", {"rule": "default_stays"}, "validation", ["a", "b"], "t1")  # resume
    with pytest.raises(InputError, match="selection rule of round 'r1' was sealed"):
        seal_selection(db, "r1", {"rule": "best_mean"}, "validation", ["a", "b"], "t2")


def test_a_resumed_round_refuses_a_changed_rule_before_compute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = config(tmp_path)
    monkeypatch.setenv("TUNELOOP_KILL_AT", "")
    # stop the round inside its challengers phase, after the seal
    from tuneloop.loop.portfolio import run as portfolio_run

    def crash(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(portfolio_run, "_run_one", crash)
    with pytest.raises(KeyboardInterrupt):
        run(path)
    monkeypatch.undo()
    assert load_state(tmp_path / "work").phases["challengers"].status == "failed"
    changed = fakeloop.runner(path, ["portfolio.selection.rule=best_mean"])
    fakeloop.CALLS.clear()
    with pytest.raises(InputError, match="sealed its selection rule"):
        changed.run()
    assert fakeloop.CALLS == []


def test_adjudicate_all_splits_alpha_by_holm(tmp_path: Path) -> None:
    state = run(config(tmp_path, adjudicate="all"))
    rec = record(tmp_path)
    assert rec.adjudicate == "all" and rec.selection_slice == "gate"
    # three challengers: Holm's first threshold is α/3; both strong ones pass, the cheaper wins
    assert rec.selected == "s150"
    assert rec.alpha_used == pytest.approx(0.05 / 3)
    assert {r.name for r in rec.challengers if r.gate_p is not None} == {"weak", "s150", "s200"}
    with open_ledger(tmp_path / "ledger" / "ledger.db") as ledger:
        verdict = ledger.verdict(state.run_id)
    assert verdict is not None and verdict.adjudication is not None
    assert verdict.adjudication["alpha_used"] == pytest.approx(0.05 / 3)
    assert verdict.decision == "promote"


def test_adjudicate_all_under_a_sequence_splits_the_rounds_alpha_k(tmp_path: Path) -> None:
    from tuneloop.stats.sequence import spending_alpha

    state = run(config(tmp_path, adjudicate="all", sequence="alpha_spending"))
    alpha_1 = spending_alpha(1, 0.05)
    assert record(tmp_path).alpha_used == pytest.approx(alpha_1 / 3)
    with open_ledger(tmp_path / "ledger" / "ledger.db") as ledger:
        verdict = ledger.verdict(state.run_id)
        (spent,) = ledger.alpha_spent()  # the bar, sealed once; the selection spends nothing
    assert verdict is not None and verdict.adjudication is not None
    assert verdict.adjudication["alpha"] == alpha_1 == verdict.bar["alpha"] == spent.alpha
    assert verdict.adjudication["alpha_used"] == pytest.approx(alpha_1 / 3)


def test_flywheel_rounds_run_a_staged_portfolio(tmp_path: Path) -> None:
    """`run --round next` (what the watcher starts): a family round, then a refinement of the
    winner's recipe, each compared on the rolling split's validation part."""
    from tests.loop.rounds.test_driver import flywheel_config

    path = flywheel_config(tmp_path)
    stages = {
        "stages": [
            {"stage": "family", "factor": "train.steps", "values": [50, 150]},
            {"stage": "refine", "factor": "train.steps", "values": [120, 200]},
        ],
        "budget": {"max_seconds": 100, "seconds_per_step": 0.1},
        "selection": {"rule": "best_mean"},
    }
    data = yaml.safe_load(path.read_text())
    data["suite"]["rolling"]["validation_fraction"] = 0.2
    path.write_text(yaml.safe_dump(data | {"portfolio": stages}))
    assert fakeloop.run_round(path) == 0
    first = record(tmp_path, "r0001")
    assert [r.name for r in first.challengers] == ["steps=50", "steps=150"]
    assert first.selected == "steps=150" and first.selection_slice == "validation"
    assert fakeloop.run_round(path) == 0  # (the fake champion arm answers as the base does)
    second = record(tmp_path, "r0002")
    assert [r.origin for r in second.challengers] == ["refine", "refine"]
    assert second.challengers[0].recipe["train"]["steps"] == 120
    assert second.selected == "steps=120"  # ties on validation go to the cheaper
    with open_ledger(tmp_path / "ledger" / "ledger.db") as ledger:
        recipe = ledger.current_champion().descriptor["recipe"]  # type: ignore[union-attr]
    assert recipe["challenger"] == "steps=120" and recipe["train"]["steps"] == 120
