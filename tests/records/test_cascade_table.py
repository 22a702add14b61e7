"""A cascade round in words (`records.cascade_table`): the composition's cells and sentences,
and the gate slice's counts, on the hand-built round of tests/cascade_fixture.py."""

from __future__ import annotations

import pytest

from tuneloop.records.cascade_table import (
    chosen_sentence,
    cost_text,
    coverage_cells,
    coverage_text,
    gate_figures,
    markdown_text,
    objective_sentence,
    served_thresholds,
    thresholds_text,
    tier_cells,
)
from tuneloop.samplelog import SampleRow

from ..cascade_fixture import (
    BIG_USD,
    CHAMPION_USD,
    REASON,
    SMALL_USD,
    as_cascade,
    as_champion,
    composition_record,
)

IDS = [f"g{i:02d}" for i in range(20)]


def _row(item: str, k: int = 0) -> SampleRow:
    return SampleRow(
        suite_revision="rev", item_id=item, sample_index=k, model="m", seed=k, score=1.0
    )


def test_the_composition_in_words() -> None:
    record = composition_record()
    assert tier_cells(record) == [
        ["`small`", "`small-model`", "0.2", "55.0%", "2e-06"],
        ["`big`", "`big-model`", "4", "85.0%", "4e-05"],
    ]
    assert served_thresholds(record) == [-0.9]
    assert chosen_sentence(record) == (
        "thresholds -0.8 (served at -0.9) → 80.0% at 1.4e-05 USD per item; "
        "items answered: `small` 70%, `big` 30%"
    )
    assert objective_sentence(record) == (
        "Objective `max_accuracy_under_cost` (budget 2e-05 USD per item), signal "
        f"`mean_logprob`, on 20 validation items: {REASON}"
    )
    assert markdown_text(REASON).count("\\$") == 2


def test_nothing_chosen_and_an_epsilon_objective() -> None:
    record = composition_record().model_copy(
        update={
            "chosen": None,
            "descriptor": None,
            "objective": "min_cost_non_inferior",
            "epsilon": 0.02,
        }
    )
    assert served_thresholds(record) is None
    assert chosen_sentence(record) == "nothing chosen: no setting meets the objective"
    assert objective_sentence(record).startswith("Objective `min_cost_non_inferior` (ε 0.02)")
    assert thresholds_text([float("inf"), -0.25, 1e-4]) == "∞, -0.25, 0.0001"


def test_the_gate_slice_counted_from_the_rows() -> None:
    gate = IDS[:10]
    post = [as_cascade(_row(item), i) for i, item in enumerate(IDS)]  # 20 rows, 10 on the slice
    pre = [as_champion(_row(item)) for item in IDS]
    figures = gate_figures(["small", "big"], pre, post, gate)
    assert (figures.n_items, figures.answers, figures.unanswered) == (10, 10, 1)
    assert [(c.tier, c.answers) for c in figures.by_tier] == [("small", 7), ("big", 2)]
    assert figures.pre_usd == pytest.approx(CHAMPION_USD) and figures.pre_items == 10
    # the item with no answer has no cost: the mean is over the 9 answered items
    expected = (7 * SMALL_USD + 2 * (SMALL_USD + BIG_USD)) / 9
    assert figures.post_usd == pytest.approx(expected) and figures.post_items == 9
    assert coverage_cells(figures) == [
        ["`small`", "7", "70.0%"],
        ["`big`", "2", "20.0%"],
        ["no answer", "1", "10.0%"],
    ]
    assert coverage_text(figures) == "`small` 7 (70.0%), `big` 2 (20.0%), no answer 1 of 10 items"
    assert cost_text(figures) == (
        "champion (pre) 4e-05 USD (10 items), cascade (post) 1.09e-05 USD (9 items); "
        "0.272 × the champion's"
    )


def test_an_item_is_the_mean_of_its_samples_and_an_unpriced_champion_is_said() -> None:
    gate = IDS[:2]
    post = [
        as_cascade(_row(IDS[0], 0), 0),  # small
        as_cascade(_row(IDS[0], 1), 7),  # big: item 0 costs the mean of both samples
        as_cascade(_row(IDS[1], 0), 0),
        as_cascade(_row(IDS[1], 1), 0),
    ]
    figures = gate_figures(["small", "big"], [_row(i) for i in gate], post, gate)
    item0 = (SMALL_USD + SMALL_USD + BIG_USD) / 2
    assert figures.post_usd == pytest.approx((item0 + SMALL_USD) / 2)
    assert figures.pre_usd is None and figures.pre_items == 0
    assert coverage_text(figures) == "`small` 3 (75.0%), `big` 1 (25.0%) of 4 answers on 2 items"
    assert cost_text(figures).startswith("champion (pre) not priced (no row carries cost_usd), ")
    assert "× the champion's" not in cost_text(figures)


def test_a_tier_the_composition_does_not_name_is_still_counted() -> None:
    post = [as_cascade(_row(IDS[0]), 0)]
    figures = gate_figures(["tiny", "huge"], [], post, IDS[:1])
    assert [(c.tier, c.answers) for c in figures.by_tier] == [
        ("tiny", 0),
        ("huge", 0),
        ("small", 1),
    ]
