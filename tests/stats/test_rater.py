"""Rater agreement: a hand-computed table, κ against scikit-learn, Wilson bounds by hand,
the degenerate tables, properties of κ and J, and the attenuation of a judged difference."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score

from tuneloop.stats.rater import (
    agreement_from_counts,
    attenuated_mde,
    corrected_difference,
    corrected_pass_rate,
    rater_agreement,
)


def _lists(tp: int, fp: int, tn: int, fn: int) -> tuple[list[bool], list[bool]]:
    """(judge, human) for a confusion table, positive = pass."""
    judge = [True] * tp + [True] * fp + [False] * tn + [False] * fn
    human = [True] * tp + [False] * fp + [False] * tn + [True] * fn
    return judge, human


def test_hand_computed_table() -> None:
    # tp=8 fp=2 tn=7 fn=3, n=20
    # p_o = (8+7)/20 = 0.75
    # judge passes 8+2=10, human passes 8+3=11
    # p_e = (10·11 + 10·9)/20² = 200/400 = 0.5
    # κ = (0.75 − 0.5)/(1 − 0.5) = 0.5      [= 2(8·7 − 3·2)/(10·9 + 11·10) = 100/200]
    # κ_max: diagonal min(10,11)=10, min(10,9)=9 → p_o,max = 19/20; (0.95 − 0.5)/0.5 = 0.9
    # FPR = 2/(2+7) = 2/9, FNR = 3/(3+8) = 3/11
    # J = 1 − 2/9 − 3/11 = (99 − 22 − 27)/99 = 50/99
    a = rater_agreement(*_lists(8, 2, 7, 3))
    assert (a.n, a.tp, a.fp, a.tn, a.fn) == (20, 8, 2, 7, 3)
    assert a.agreement == 0.75
    assert a.expected_agreement == 0.5
    assert a.kappa == pytest.approx(0.5, abs=1e-15)
    assert a.kappa_max == pytest.approx(0.9, abs=1e-15)
    assert a.fpr == pytest.approx(2 / 9) and a.specificity == pytest.approx(7 / 9)
    assert a.fnr == pytest.approx(3 / 11) and a.sensitivity == pytest.approx(8 / 11)
    assert a.youden_j == pytest.approx(50 / 99)


def test_wilson_bounds_by_hand() -> None:
    # Wilson (1927): centre = (2np + z²)/(2(n + z²)), half-width = z/(2(n + z²))·√(4npq + z²),
    # z = 1.959963984540054 (95 %), z² = 3.841458820694124.
    # FPR 2/9: centre = (4 + 3.841459)/25.682918 = 0.305318; half = 0.076313·√10.063681
    #          = 0.242093 → [0.063225, 0.547411]
    # FNR 3/11: centre = (6 + 3.841459)/29.682918 = 0.331553; half = 0.066028·√(8.727273 +
    #          3.841459) = 0.234092 → [0.097461, 0.565645]
    # agreement 15/20: centre = (30 + 3.841459)/47.682918 = 0.709719; half = 0.041104·
    #          √(15 + 3.841459) = 0.178420 → [0.531299, 0.888138]
    a = rater_agreement(*_lists(8, 2, 7, 3))
    assert a.fpr_ci is not None and a.fnr_ci is not None
    assert (round(a.fpr_ci.low, 6), round(a.fpr_ci.high, 6)) == (0.063225, 0.547411)
    assert (round(a.fnr_ci.low, 6), round(a.fnr_ci.high, 6)) == (0.097461, 0.565645)
    assert (round(a.agreement_ci.low, 6), round(a.agreement_ci.high, 6)) == (0.531299, 0.888138)
    # the conservative J: 1 − 0.547411 − 0.565645
    assert a.youden_j_low == pytest.approx(1 - 0.5474110308930111 - 0.5656453011761292)


@pytest.mark.parametrize(
    "counts", [(8, 2, 7, 3), (40, 5, 50, 5), (1, 0, 0, 1), (0, 3, 4, 0), (10, 10, 10, 10)]
)
def test_kappa_matches_sklearn(counts: tuple[int, int, int, int]) -> None:
    judge, human = _lists(*counts)
    a = rater_agreement(judge, human)
    assert a.kappa == pytest.approx(cohen_kappa_score(judge, human), abs=1e-12)


def test_no_human_fails_leaves_fpr_and_j_undefined() -> None:
    a = rater_agreement([True, False, True], [True, True, True])
    assert a.fpr is None and a.fpr_ci is None and a.specificity is None
    assert a.youden_j is None and a.youden_j_low is None
    assert a.fnr == pytest.approx(1 / 3) and a.fnr_ci is not None
    # judge marginal 2/3 pass, human all pass: p_e = (2·3 + 1·0)/9 = 2/3, p_o = 2/3 → κ = 0
    assert a.kappa == 0.0


def test_no_human_passes_leaves_fnr_undefined() -> None:
    a = rater_agreement([False, True], [False, False])
    assert a.fnr is None and a.fnr_ci is None and a.sensitivity is None
    assert a.fpr == 0.5 and a.youden_j is None


def test_kappa_undefined_when_both_raters_give_one_verdict() -> None:
    # p_e = 1: κ is 0/0 (scikit-learn returns nan); here it is None, not an error
    a = rater_agreement([True] * 5, [True] * 5)
    assert a.kappa is None and a.kappa_max is None
    assert a.agreement == 1.0 and a.expected_agreement == 1.0
    # opposite constant verdicts: p_e = 0 and p_o = 0, so κ = 0 is defined
    b = rater_agreement([True] * 5, [False] * 5)
    assert b.kappa == 0.0 and b.agreement == 0.0


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="at least one"):
        rater_agreement([], [])
    with pytest.raises(ValueError, match="one length"):
        rater_agreement([True], [True, False])
    with pytest.raises(ValueError, match=">= 0"):
        agreement_from_counts(-1, 0, 0, 1)


_rows = st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=60)


@settings(max_examples=200, deadline=None)
@given(_rows)
def test_kappa_properties(rows: list[tuple[bool, bool]]) -> None:
    judge = [j for j, _ in rows]
    human = [h for _, h in rows]
    a = rater_agreement(judge, human)
    swapped = rater_agreement(human, judge)
    if a.kappa is None:
        assert swapped.kappa is None
        assert len(set(judge)) == 1 and set(judge) == set(human)
        return
    assert a.kappa_max is not None
    # κ ≤ p_o (as 1 − p_e ≤ 1 and p_o ≤ 1), κ ≤ κ_max, κ ≥ −1
    assert -1.0 - 1e-12 <= a.kappa <= a.agreement + 1e-12
    assert a.kappa <= a.kappa_max + 1e-12
    # κ is symmetric in the two raters' roles; FPR and FNR trade places
    assert swapped.kappa == pytest.approx(a.kappa, abs=1e-12)
    assert (swapped.fp, swapped.fn) == (a.fn, a.fp)
    # κ = 1 exactly when the raters agree on every row and both verdicts occur
    perfect = judge == human and len(set(human)) == 2
    assert (a.kappa == pytest.approx(1.0)) == perfect
    assert a.kappa == pytest.approx(cohen_kappa_score(judge, human), abs=1e-9)


@settings(max_examples=200, deadline=None)
@given(_rows)
def test_j_is_in_range_and_its_bound_below(rows: list[tuple[bool, bool]]) -> None:
    a = rater_agreement([j for j, _ in rows], [h for _, h in rows])
    if a.youden_j is None:
        assert a.fpr is None or a.fnr is None
        return
    assert a.youden_j_low is not None
    assert -1.0 <= a.youden_j <= 1.0
    assert a.youden_j_low <= a.youden_j + 1e-12
    assert a.fpr_ci is not None and a.fpr_ci.low <= a.fpr <= a.fpr_ci.high  # type: ignore[operator]


def test_attenuation_of_a_difference() -> None:
    # sens 0.9, spec 0.8 → J = 0.7; true pass rates 0.6 and 0.7
    sens, spec = 0.9, 0.8
    j = sens + spec - 1

    def observed(p: float) -> float:
        return (1 - spec) + j * p  # p_obs = P(judge pass) = sens·p + (1 − spec)(1 − p)

    assert observed(0.6) == pytest.approx(sens * 0.6 + (1 - spec) * 0.4)
    delta_obs = observed(0.7) - observed(0.6)
    assert delta_obs == pytest.approx(0.07)
    assert corrected_difference(delta_obs, j) == pytest.approx(0.1)
    assert corrected_pass_rate(observed(0.6), sens, spec) == pytest.approx(0.6)
    assert corrected_pass_rate(0.05, sens, spec) == 0.0  # below 1 − spec: clipped
    assert attenuated_mde(0.035, j) == pytest.approx(0.05)
    assert attenuated_mde(0.035, 1.0) == 0.035


@pytest.mark.parametrize("j", [0.0, -0.2, None, math.nan])
def test_a_chance_judge_detects_nothing(j: float | None) -> None:
    assert attenuated_mde(0.05, j) == math.inf


@pytest.mark.parametrize("j", [0.0, -0.5, 1.5])
def test_correction_refuses_a_j_outside_0_1(j: float) -> None:
    with pytest.raises(ValueError, match="Youden"):
        corrected_difference(0.1, j)
    with pytest.raises(ValueError, match="Youden"):
        corrected_pass_rate(0.5, 0.5, 0.5)
