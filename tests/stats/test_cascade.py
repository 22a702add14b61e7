"""Cascade composition on exact small vectors, and the frontier's properties."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tuneloop.stats.cascade import (
    CascadeOutcome,
    best_under_cost,
    cheapest_non_inferior,
    compose,
    frontier,
    pareto,
)

# four items: the cheap tier is right on 0 and 1 (sure of 0, unsure of 1), wrong on 2 (sure)
# and 3 (unsure); the big tier is right on all but 1
CHEAP = ([1, 1, 0, 0], [-0.1, -2.0, -0.2, -3.0], [1, 1, 1, 1])
BIG = ([1, 0, 1, 1], [0, 0, 0, 0], [10, 10, 10, 10])


def tiers() -> tuple[list, list, list]:
    return [CHEAP[0], BIG[0]], [CHEAP[1], BIG[1]], [CHEAP[2], BIG[2]]


def test_one_threshold_composed_by_hand() -> None:
    score, cost, tier = compose(*tiers(), [-1.0])  # keeps items 0 and 2
    assert tier.tolist() == [0, 1, 0, 1]
    assert score.tolist() == [1, 0, 0, 1]
    assert cost.tolist() == [1, 11, 1, 11]  # a hand-off pays both tiers


def test_the_ends_of_the_range_are_the_single_tiers_costs() -> None:
    keep_all = compose(*tiers(), [-math.inf])
    hand_all = compose(*tiers(), [math.inf])
    assert keep_all[0].tolist() == CHEAP[0] and keep_all[1].tolist() == [1] * 4
    assert hand_all[0].tolist() == BIG[0] and hand_all[1].tolist() == [11] * 4


def test_the_frontier_and_the_two_objectives() -> None:
    front = frontier(*tiers())
    # -3.0 keeps all (2 of 4 right, cost 1); -2.0 hands only item 3 off, which the big tier
    # gets right (3 of 4, cost (1+1+1+11)/4); every other setting is dominated by one of them
    assert [(o.thresholds, o.accuracy, o.cost) for o in front] == [
        ((-3.0,), 0.5, 1.0),
        ((-2.0,), 0.75, 3.5),
    ]
    assert front[1].coverage == (0.75, 0.25)
    best_single = max(np.mean(CHEAP[0]), np.mean(BIG[0]))  # the big tier: 0.75 at cost 10
    assert cheapest_non_inferior(front, best_single) == front[1]
    assert best_under_cost(front, 0.5) is None
    assert best_under_cost(front, 1.0) == front[0] and best_under_cost(front, 4) == front[1]


def test_pareto_keeps_only_the_undominated_cheapest_first() -> None:
    o = [
        CascadeOutcome((1.0,), 0.5, 2.0, (1, 0)),
        CascadeOutcome((2.0,), 0.4, 3.0, (1, 0)),  # dominated
        CascadeOutcome((3.0,), 0.7, 3.0, (1, 0)),
        CascadeOutcome((4.0,), 0.7, 1.0, (1, 0)),
    ]
    assert [x.thresholds for x in pareto(o)] == [(4.0,)]


def test_bad_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="≥ 2 tiers"):
        compose([[1, 0]], [[0, 0]], [[1, 1]], [])
    with pytest.raises(ValueError, match="take 1 thresholds"):
        compose(*tiers(), [0.0, 1.0])
    with pytest.raises(ValueError, match="confidence for every item"):
        frontier([[1], [1]], [[math.nan], [0]], [[1], [1]])


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 30), st.integers(0, 1000))
def test_every_threshold_lies_between_the_tiers_and_the_frontier_is_monotone(
    n: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    s = rng.integers(0, 2, size=(3, n))
    c = -rng.exponential(size=(3, n)).round(1)
    k = np.array([np.full(n, 1.0), np.full(n, 5.0), np.full(n, 20.0)])
    front = frontier(s, c, k)
    assert front and all(
        a.cost <= b.cost and a.accuracy < b.accuracy for a, b in itertools.pairwise(front)
    )
    for o in front:
        assert 1.0 <= o.cost <= 26.0 and math.isclose(sum(o.coverage), 1.0)
    # the cheapest setting keeps everything at tier 1; none costs less
    assert front[0].cost == 1.0 and front[0].accuracy == s[0].mean()
