"""Selection rules on constructed scores: the paired figures against scipy's binomtest,
`default_stays`' three conditions, `best_mean`'s ties, and Holm's step-down against thresholds
computed by hand."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

from tuneloop.stats import (
    UNTAGGED,
    best_mean,
    default_stays,
    holm_adjust,
    holm_choice,
    paired_figures,
    tag_differences,
    tag_means,
)


def _binom(wins: int, losses: int) -> float:
    n = wins + losses
    return 1.0 if n == 0 else float(binomtest(wins, n, 0.5, alternative="two-sided").pvalue)


def _vectors(wins: int, losses: int, ties: int) -> tuple[list[float], list[float]]:
    """Candidate and default item scores with exactly these wins, losses and ties."""
    cand = [1.0] * wins + [0.0] * losses + [0.5] * ties
    base = [0.0] * wins + [1.0] * losses + [0.5] * ties
    return cand, base


@pytest.mark.parametrize(
    ("wins", "losses", "ties"),
    [(9, 2, 5), (3, 3, 0), (12, 0, 1), (0, 7, 4), (1, 0, 0), (20, 11, 9), (0, 0, 6)],
)
def test_paired_figures_counts_and_sign_p_equal_binomtest(
    wins: int, losses: int, ties: int
) -> None:
    cand, base = _vectors(wins, losses, ties)
    f = paired_figures(cand, base)
    assert (f.wins, f.losses, f.ties, f.n_items) == (wins, losses, ties, wins + losses + ties)
    assert f.sign_p == pytest.approx(_binom(wins, losses), rel=1e-12)
    assert f.advantage == pytest.approx((wins - losses) / (wins + losses + ties))
    assert f.mean_candidate == pytest.approx(np.mean(cand))


def test_no_discordant_item_gives_p_one() -> None:
    f = paired_figures([0.25, 1.0, 0.0], [0.25, 1.0, 0.0])
    assert (f.wins, f.losses, f.ties, f.sign_p, f.advantage) == (0, 0, 3, 1.0, 0.0)


def test_fractional_item_scores_count_wins_by_item() -> None:
    # items scored as means over samples: 2/3 beats 1/3, 0.5 ties 0.5
    f = paired_figures([2 / 3, 0.5, 0.0, 1.0], [1 / 3, 0.5, 1 / 3, 0.0])
    assert (f.wins, f.losses, f.ties) == (2, 1, 1)
    assert f.sign_p == pytest.approx(_binom(2, 1), rel=1e-12)


def test_tags_count_each_item_under_each_tag_and_untagged_under_empty() -> None:
    scores = [1.0, 0.0, 0.5, 1.0]
    tags = [["x"], ["x", "y"], [], ["y"]]
    assert tag_means(scores, tags) == {UNTAGGED: 0.5, "x": 0.5, "y": 0.5}
    diffs = tag_differences([1.0, 0.0, 0.5, 1.0], [1.0, 0.1, 0.5, 1.0], tags, 0.04)
    assert [(d.tag, d.n_items, d.non_inferior) for d in diffs] == [
        ("", 1, True),
        ("x", 2, False),  # 0.5 vs 0.55: −0.05 < −0.04
        ("y", 2, False),
    ]
    assert diffs[1].difference == pytest.approx(-0.05)


def _arms(*, b_wins: int, b_losses: int, ties: int) -> dict[str, list[float]]:
    cand, base = _vectors(b_wins, b_losses, ties)
    return {"a": base, "b": cand}


def test_default_stays_when_the_sign_test_p_is_too_high() -> None:
    scores = _arms(b_wins=6, b_losses=3, ties=11)  # advantage > 0, p = 0.508
    tags = [["t"]] * 20
    s = default_stays(scores, tags, "a", sign_p=0.10, epsilon=0.05)
    assert s.chosen == "a" and s.default == "a"
    (t,) = s.tests
    assert t.positive and t.non_inferior and not t.significant and not t.beats_default
    assert t.paired.sign_p == pytest.approx(_binom(6, 3), rel=1e-12)
    assert "default 'a' stays: 'b' advantage +0.150 but sign-test p 0.508 > 0.1" in s.reason


def test_default_stays_when_one_tag_is_inferior() -> None:
    # b wins 14 items on tag "easy" and loses 2 of 4 items on tag "hard" (−0.5 on hard)
    base = [0.0] * 14 + [1.0, 1.0, 0.0, 0.0]
    cand = [1.0] * 14 + [0.0, 0.0, 0.0, 0.0]
    tags = [["easy"]] * 14 + [["hard"]] * 4
    s = default_stays({"a": base, "b": cand}, tags, "a", sign_p=0.10, epsilon=0.05)
    (t,) = s.tests
    assert t.positive and t.significant and not t.non_inferior
    assert s.chosen == "a"
    assert "inferior on tag 'hard' (-0.500 < -0.05)" in s.reason


def test_default_is_replaced_when_all_three_conditions_hold() -> None:
    scores = _arms(b_wins=12, b_losses=1, ties=7)
    s = default_stays(scores, [[]] * 20, "a", sign_p=0.10, epsilon=0.05)
    assert s.chosen == "b"
    (t,) = s.tests
    assert t.beats_default and t.paired.sign_p == pytest.approx(_binom(12, 1), rel=1e-12)
    assert s.reason.startswith("'b' replaces default 'a': 'b' advantage +0.550, sign-test p")


def test_non_positive_advantage_never_beats_the_default() -> None:
    scores = {"a": [1.0, 0.0, 1.0], "b": [1.0, 0.0, 1.0]}
    s = default_stays(scores, [[]] * 3, "a", sign_p=0.5, epsilon=0.05)
    assert s.chosen == "a" and "'b' advantage +0.000 is not positive" in s.reason


def test_several_winners_go_to_the_highest_mean_then_the_cheaper_then_the_name() -> None:
    base = [0.0] * 20
    strong = [1.0] * 20
    scores = {"a": base, "c": strong, "b": strong, "d": [1.0] * 15 + [0.0] * 5}
    tags: list[list[str]] = [[]] * 20
    s = default_stays(scores, tags, "a", sign_p=0.10, epsilon=0.05)
    assert s.chosen == "b"  # b and c tie on mean and (unknown) cost: the name
    costs = {"a": 1.0, "b": 9.0, "c": 3.0, "d": 0.5}
    s = default_stays(scores, tags, "a", sign_p=0.10, epsilon=0.05, costs=costs)
    assert s.chosen == "c"  # d is cheapest but its mean is lower
    assert "3 arms beat the default" in s.reason
    with pytest.raises(ValueError, match="not among the arms"):
        default_stays(scores, tags, "z", sign_p=0.1, epsilon=0.05)


def test_best_mean_ties_go_to_the_cheaper_then_the_name() -> None:
    scores = {"x": [1.0, 0.0], "y": [0.0, 1.0], "z": [0.0, 0.0]}
    assert best_mean(scores, {"x": 30.0, "y": 12.0, "z": 1.0}).chosen == "y"
    assert best_mean(scores, {"x": 30.0, "y": None}).chosen == "x"  # unknown cost sorts last
    assert best_mean(scores).chosen == "x"  # no costs: the name
    s = best_mean({"x": [1.0, 0.0], "y": [1.0, 1.0]})
    assert s.chosen == "y" and s.default is None and s.tests == ()
    assert s.reason == "'y' has the highest mean (1.0000); next 'x' at 0.5000"


def test_holm_choice_matches_hand_computed_thresholds() -> None:
    p = {"a": 0.01, "b": 0.04, "c": 0.03}
    h = holm_choice(p, {"a": True, "b": True, "c": True}, alpha=0.05)
    by = {arm.name: arm for arm in h.arms}
    assert [arm.name for arm in h.arms] == ["a", "c", "b"]
    assert by["a"].threshold == pytest.approx(0.05 / 3)
    assert by["c"].threshold == pytest.approx(0.05 / 2)
    assert by["b"].threshold == pytest.approx(0.05 / 1)
    assert [by[n].rejected for n in "acb"] == [True, False, False]  # .03 ≥ .025 stops it
    assert [by[n].p_adjusted for n in "abc"] == pytest.approx([0.03, 0.06, 0.06])
    assert h.chosen == "a"
    # only a passes Holm; with its other conditions failing, nothing is chosen
    h = holm_choice(p, {"a": False, "b": True, "c": True}, alpha=0.05)
    assert h.chosen is None
    assert "'a' pass Holm's step-down but fail the bar's other conditions" in h.reason
    assert "stops at 'c': p 0.03 ≥ threshold 0.025" in h.reason


def test_holm_choice_takes_the_cheapest_rejected_arm_that_passes() -> None:
    p = {"a": 0.001, "b": 0.02, "c": 0.5}
    passes = {"a": True, "b": True, "c": True}
    # thresholds .05/3, .05/2, .05: a and b rejected (.02 < .025), c not
    h = holm_choice(p, passes, alpha=0.05, costs={"a": 10.0, "b": 5.0, "c": 1.0})
    assert h.chosen == "b"
    h = holm_choice(p, {**passes, "b": False}, 0.05, costs={"a": 10.0, "b": 5.0, "c": 1.0})
    assert h.chosen == "a"
    h = holm_choice(p, passes, alpha=0.05, costs={"a": 5.0, "b": 5.0})
    assert h.chosen == "a"  # same cost: the smaller p
    h = holm_choice(p, passes, alpha=0.05, costs={"a": None, "b": 5.0})
    assert h.chosen == "b"  # unknown cost last
    assert holm_choice({"a": 0.2}, {"a": True}, 0.05).chosen is None
    assert holm_choice({}, {}, 0.05).chosen is None
    with pytest.raises(ValueError, match="passes names"):
        holm_choice({"a": 0.01}, {"b": True}, 0.05)


def test_a_single_arm_is_the_gates_strict_test() -> None:
    assert holm_choice({"a": 0.05}, {"a": True}, 0.05).chosen is None
    assert holm_choice({"a": 0.0499}, {"a": True}, 0.05).chosen == "a"


item_pairs = st.lists(
    st.tuples(st.sampled_from([0.0, 0.25, 0.5, 1.0]), st.sampled_from([0.0, 0.5, 1.0])),
    min_size=1,
    max_size=40,
)


@settings(max_examples=80, deadline=None)
@given(item_pairs)
def test_sign_p_equals_binomtest_on_any_scores(pairs: list[tuple[float, float]]) -> None:
    cand, base = zip(*pairs, strict=True)
    f = paired_figures(cand, base)
    wins = sum(c > b for c, b in pairs)
    losses = sum(c < b for c, b in pairs)
    assert (f.wins, f.losses) == (wins, losses)
    assert f.sign_p == pytest.approx(_binom(wins, losses), rel=1e-12)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=12, max_size=12), min_size=2, max_size=5
    ),
    st.sampled_from([0.05, 0.1, 0.5]),
)
def test_default_stays_only_ever_picks_an_arm_that_meets_every_condition(
    arms: list[list[float]], sign_p: float
) -> None:
    scores = {f"arm{i}": s for i, s in enumerate(arms)}
    tags = [["even"] if i % 2 == 0 else [] for i in range(12)]
    s = default_stays(scores, tags, "arm0", sign_p=sign_p, epsilon=0.1)
    if s.chosen == "arm0":
        assert not any(t.beats_default for t in s.tests)
        return
    (t,) = [t for t in s.tests if t.candidate == s.chosen]
    assert t.paired.advantage > 0 and t.paired.sign_p <= sign_p
    assert all(d.difference >= -0.1 for d in t.tags)
    assert all(s.means[s.chosen] >= s.means[u.candidate] for u in s.tests if u.beats_default)


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from("abcdefg"), st.floats(min_value=0.0, max_value=1.0), min_size=1
    ),
    st.sampled_from([0.01, 0.05, 0.1]),
)
def test_holm_rejects_a_prefix_exactly_where_the_adjusted_p_is_below_alpha(
    p: dict[str, float], alpha: float
) -> None:
    h = holm_choice(p, dict.fromkeys(p, True), alpha)
    flags = [a.rejected for a in h.arms]
    assert flags == sorted(flags, reverse=True)  # a prefix of the ascending p-values
    adjusted = holm_adjust([a.p for a in h.arms])
    for arm, adj in zip(h.arms, adjusted, strict=True):
        assert arm.p_adjusted == adj
        assert arm.rejected == (adj < alpha) or abs(adj - alpha) < 1e-12
    assert (h.chosen is None) == (not any(flags))
