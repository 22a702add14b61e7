"""The flywheel's error budget (`gate.sequence`): each round's α_k sealed, stored, summed and
refused when it would overspend (`tuneloop.gate.sequence`)."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pytest

from tuneloop.config import GateConfig
from tuneloop.config.gate import CostBarConfig
from tuneloop.errors import InputError
from tuneloop.gate import Bar, adjudicate
from tuneloop.gate.ledger import SealedBar, open_ledger
from tuneloop.gate.seal import check_seal, seal_bar, seal_selection
from tuneloop.gate.sequence import alpha_budget, round_bar, spend_alpha
from tuneloop.stats.sequence import lord_alpha, spending_alpha, spent_alpha

from .conftest import flat, improved, item_id

pytestmark = pytest.mark.filterwarnings("ignore")
IDS = [item_id(i) for i in range(90)]
SPENDING = GateConfig(sequence="alpha_spending")  # type: ignore[arg-type]  # the shorthand


def seal(ledger: Path, run: str, gate: GateConfig = SPENDING, at: str = "") -> SealedBar:
    """What the loop's `seal_round` does: the round's bar, sealed."""
    bar = round_bar(gate, gate.sequence, ledger, run)
    return seal_bar(ledger, run, bar, "gate", IDS, at or f"2026-12-0{run[-1]}T00:00:00Z")


def test_three_rounds_spend_alpha_1_2_3_and_the_ledger_sums_to_the_series(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    assert round_bar(SPENDING, SPENDING.sequence, db, "r1").alpha == spending_alpha(1, 0.05)
    assert not db.exists()  # reading the next round's bar creates no ledger
    sealed = [seal(db, f"r{k}") for k in (1, 2, 3)]
    with open_ledger(db) as ledger:
        rows = ledger.alpha_spent()
    assert [(r.seal_id, r.k, r.rule) for r in rows] == [
        ("r1", 1, "alpha_spending"),
        ("r2", 2, "alpha_spending"),
        ("r3", 3, "alpha_spending"),
    ]
    assert [r.alpha for r in rows] == [spending_alpha(k, 0.05) for k in (1, 2, 3)]
    assert math.isclose(sum(r.alpha for r in rows), spent_alpha(3, 0.05), rel_tol=1e-12)
    # the sealed bar carries its α_k and its place, in its dict and its hash
    third = sealed[2]
    assert third.bar["alpha"] == spending_alpha(3, 0.05)
    assert third.bar["sequence"] == {
        "rule": "alpha_spending",
        "k": 3,
        "total_alpha": 0.05,
        "series": "basel",
    }
    assert rows[2].bar_sha256 == third.bar_sha256 != Bar().sha256()
    budget = alpha_budget(SPENDING, db)
    assert (budget.rule, budget.next_k, budget.before_rule) == ("alpha_spending", 4, 0)
    assert math.isclose(budget.spent, spent_alpha(3, 0.05), rel_tol=1e-12)
    assert math.isclose(budget.remaining or 0, 0.05 - spent_alpha(3, 0.05), rel_tol=1e-9)
    assert budget.next_alpha == spending_alpha(4, 0.05)
    assert [r.promoted for r in budget.rounds] == [None, None, None]  # sealed, not decided


def test_a_resumed_round_keeps_its_k_and_spends_nothing_more(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    for k in (1, 2, 3):
        seal(db, f"r{k}")
    bar = round_bar(SPENDING, SPENDING.sequence, db, "r2")
    assert bar.sequence is not None and bar.sequence.k == 2
    assert bar.alpha == spending_alpha(2, 0.05)
    again = seal(db, "r2")  # the resumed eval_post seals again: the same seal
    with open_ledger(db) as ledger:
        assert ledger.sealed("r2") == again and len(ledger.alpha_spent()) == 3
        check_seal(again, bar, "gate", IDS, ledger)  # the gate judges against the same bar


def test_a_bar_asking_more_than_its_alpha_k_is_refused_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    db = tmp_path / "ledger.db"
    for k in (1, 2, 3):
        seal(db, f"r{k}")
    bar = round_bar(SPENDING, SPENDING.sequence, db, "r4")
    greedy = bar.model_copy(update={"alpha": 0.05})
    with pytest.raises(InputError) as err:
        seal_bar(db, "r4", greedy, "gate", IDS, "2026-12-04T00:00:00Z")
    assert str(err.value) == (
        "round 'r4': its bar asks alpha 0.05, but gate.sequence (alpha spending, basel "
        f"series, flywheel α 0.05) allows round 4 of the sequence α_4 = 0.0019 in {db}; "
        "nothing was sealed. A round may not spend more than the rule gives it: let the rule "
        "set the bar's alpha (gate.alpha is the whole sequence's α), or gate in another ledger"
    )
    with open_ledger(db) as ledger:
        assert ledger.sealed("r4") is None and len(ledger.alpha_spent()) == 3
    # a bar made for an earlier place (another round sealed meanwhile) is refused too
    stale = Bar().model_copy(update={"alpha": bar.alpha, "sequence": bar.sequence})
    seal(db, "r5")
    with pytest.raises(InputError, match="made for round 4 of the sequence.*round 5"):
        seal_bar(db, "r4", stale, "gate", IDS, "2026-12-06T00:00:00Z")


def test_a_uniform_series_past_its_horizon_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    gate = GateConfig(sequence={"rule": "alpha_spending", "series": "uniform", "horizon": 2})  # type: ignore[arg-type]
    first, second = seal(db, "r1", gate), seal(db, "r2", gate)
    assert first.bar["alpha"] == second.bar["alpha"] == 0.025
    with pytest.raises(InputError) as err:
        round_bar(gate, gate.sequence, db, "r3")
    message = str(err.value)
    assert message.startswith(
        "the sequence's α is spent: gate.sequence (alpha spending, uniform over 2 rounds, "
        "flywheel α 0.05) gave its 2 rounds α 0.025 each, and round 3 may spend nothing"
    )
    assert "another ledger" in message
    budget = alpha_budget(gate, db)
    assert budget.next_alpha == 0.0 and budget.refusal == message and budget.remaining == 0.0
    # sealing it by hand is refused inside the transaction as well
    bar = round_bar(gate, gate.sequence, db, "r2")
    assert bar.sequence is not None
    late = bar.model_copy(update={"sequence": bar.sequence.model_copy(update={"k": 3})})
    with (
        open_ledger(db) as ledger,
        pytest.raises(InputError, match="α is spent"),
        ledger.transaction(),
    ):
        spend_alpha(ledger, "r3", late, "t")


def test_another_rule_or_no_rule_in_a_ledger_whose_sequence_began_is_refused(
    tmp_path: Path,
) -> None:
    db = tmp_path / "ledger.db"
    seal(db, "r1")
    with pytest.raises(InputError, match="this round's bar has none"):
        round_bar(GateConfig(), None, db, "r2")
    with pytest.raises(InputError, match="this round's bar has none"):
        seal_bar(db, "r2", Bar(), "gate", IDS, "t")
    wider = GateConfig(alpha=0.1, sequence="alpha_spending")  # type: ignore[arg-type]
    with pytest.raises(InputError) as err:
        round_bar(wider, wider.sequence, db, "r2")
    assert "declared by its first round ('r1'" in str(err.value)
    assert "as alpha spending, basel series, flywheel α 0.05" in str(err.value)
    assert "asks for alpha spending, basel series, flywheel α 0.1" in str(err.value)
    # a portfolio's selection rule, sealed beside the bar, spends nothing and counts nothing
    seal_selection(db, "r2", {"rule": "best_mean"}, "validation", IDS, "t")
    assert alpha_budget(SPENDING, db).next_k == 2
    # a round of the sequence resumed without the rule gets the bar without it, which its
    # seal then refuses as another bar
    assert round_bar(GateConfig(), None, db, "r1") == Bar()
    with pytest.raises(InputError, match="round 1 of the sequence"):
        seal_bar(db, "r1", Bar(), "gate", IDS, "t")
    budget = alpha_budget(GateConfig(), db)  # the config dropped the rule: the ledger's stands
    assert budget.rule == "alpha_spending" and budget.next_alpha == 0.0
    assert budget.refusal is not None and "bar has none" in budget.refusal


def test_rounds_before_the_rule_are_outside_the_sequence(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    seal_bar(db, "r0", Bar(), "gate", IDS, "2026-11-30T00:00:00Z")  # before gate.sequence
    none = alpha_budget(GateConfig(), db)
    assert (none.rule, none.next_k, none.before_rule, none.spent) == ("none", 2, 0, 0.05)
    assert [(r.seal_id, r.k, r.alpha, r.promoted) for r in none.rounds] == [("r0", 1, 0.05, None)]
    seal(db, "r1")
    assert round_bar(GateConfig(), None, db, "r0") == Bar()  # r0 resumes with its own bar
    budget = alpha_budget(SPENDING, db)
    assert [(r.seal_id, r.alpha, r.promoted) for r in budget.before] == [("r0", 0.05, None)]
    assert [(r.seal_id, r.k) for r in budget.rounds] == [("r1", 1)]
    assert budget.before_rule == 1 and math.isclose(budget.risk(), 0.05)
    assert budget.spent == spending_alpha(1, 0.05)


def test_lord_alpha_grows_after_a_promotion(make_log, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = tmp_path / "ledger.db"
    gate = GateConfig(sequence="lord", test="sign")  # type: ignore[arg-type]
    champ, chall = make_log("champ", flat(200, 0.0)), make_log("chall", improved(200, every=2))
    before = round_bar(gate, gate.sequence, db, "r1")
    assert before.alpha == lord_alpha(1, 0.05, [])
    sealed = seal(db, "r1", gate)
    verdict = adjudicate(
        champ,
        chall,
        bar=round_bar(gate, gate.sequence, db, "r1"),
        slice_name="gate",
        item_ids=IDS,
        ledger_path=db,
        out_dir=tmp_path / "out" / "r1",
        run_id="r1",
        sealed=sealed,
        promote=False,
    )
    assert verdict.decision == "promote"
    significance = next(c for c in verdict.conditions if c.name == "significance")
    assert "< α_1 = 0.00134: round 1 of the sequence, LORD++, initial wealth 0.025" in (
        significance.detail
    )
    assert significance.values["sequence_k"] == 1
    grown = round_bar(gate, gate.sequence, db, "r2")
    assert grown.sequence is not None and grown.sequence.rejections == (1,)
    assert grown.alpha == lord_alpha(2, 0.05, [1]) > lord_alpha(2, 0.05, [])
    budget = alpha_budget(gate, db)
    assert [r.promoted for r in budget.rounds] == [True] and budget.next_alpha == grown.alpha
    assert math.isclose(budget.remaining or 0, 0.025 - before.alpha + 0.025)
    # a bar sealed as though nothing had been promoted is refused: the ledger knows better
    blind = grown.model_copy(
        update={
            "alpha": lord_alpha(2, 0.05, []),
            "sequence": grown.sequence.model_copy(update={"rejections": ()}),
        }
    )
    with pytest.raises(InputError, match=r"now makes it round 2 after promotions in rounds \[1\]"):
        seal_bar(db, "r2", blind, "gate", IDS, "t")


def test_the_standalone_gate_spends_its_alpha_with_its_verdict(make_log, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = tmp_path / "ledger.db"
    log = make_log("champ", improved(200))
    bar = round_bar(SPENDING, SPENDING.sequence, db, "g1")
    verdict = adjudicate(
        log,
        log,
        bar=bar,
        slice_name="gate",
        item_ids=IDS,
        ledger_path=db,
        out_dir=tmp_path / "out",
        run_id="g1",
    )
    assert verdict.decision == "reject" and verdict.bar["sequence"]["k"] == 1
    budget = alpha_budget(SPENDING, db)
    assert [(r.seal_id, r.k, r.promoted) for r in budget.rounds] == [("g1", 1, False)]
    entry = (tmp_path / "EXPERIMENT-LOG.md").read_text()
    assert "α 0.0304 (α_1: alpha spending, basel series, flywheel α 0.05)" in entry


def test_a_bar_without_a_sequence_keeps_the_hash_it_had_before() -> None:
    # computed with the bar.py of the commit before the sequence existed
    assert Bar().sha256() == "74e521a5f83092eee74c6c3eafafe9a97ec19eb17ba69dbfe1e2dec2e5e40bd6"
    capped = Bar(
        margin=0.02,
        alpha=0.01,
        test="sign",
        non_inferiority_epsilon=0.05,
        scorer="turns",
        cost=CostBarConfig(max_usd_per_item=0.0004, max_ratio_to_champion=0.6),
    )
    assert capped.sha256() == "b34b54a8bdaba3def30e6ab678180502cd7ea6aa088b9429d8cf76288b754273"
    assert "sequence" not in capped.to_dict()
    assert Bar.of(GateConfig(sequence="lord")) == Bar()  # type: ignore[arg-type]


def test_a_version_5_ledger_is_upgraded_and_its_rounds_count_as_before_the_rule(
    tmp_path: Path,
) -> None:
    db = tmp_path / "ledger.db"
    seal_bar(db, "old", Bar(), "gate", IDS, "2026-11-01T00:00:00Z")
    con = sqlite3.connect(db)
    con.executescript("DROP TABLE alpha_spent; UPDATE meta SET value = '5';")
    con.close()
    budget = alpha_budget(SPENDING, db)  # opening it upgrades it in place
    assert [r.seal_id for r in budget.before] == ["old"] and budget.rounds == []
    assert budget.model_dump()["before_rule"] == 1
    with open_ledger(db) as ledger:
        assert ledger.conn.execute("SELECT value FROM meta").fetchone()[0] == "6"
        assert ledger.alpha_spent() == [] and ledger.sealed("old") is not None
    seal(db, "r1")
    assert [r.seal_id for r in alpha_budget(SPENDING, db).rounds] == ["r1"]
