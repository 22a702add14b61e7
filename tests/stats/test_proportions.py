"""Wilson intervals against scipy; clustered SE against Miller (2024)'s formula by brute force."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

from tuneloop.stats import clustered_se, mean_item_scores, wilson_interval


@pytest.mark.parametrize("n", [1, 2, 7, 30, 163, 1000])
@pytest.mark.parametrize("confidence", [0.8, 0.9, 0.95, 0.99])
def test_wilson_matches_scipy_for_every_count(n: int, confidence: float) -> None:
    for k in sorted({0, 1, n // 3, n // 2, n - 1, n}):
        ref = binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
        low, high = wilson_interval(k, n, confidence)
        assert low == pytest.approx(ref.low, abs=1e-12)
        assert high == pytest.approx(ref.high, abs=1e-12)


def test_wilson_known_vector() -> None:
    # Newcombe (1998) Table I, example (i): 81/263 → 0.2553 to 0.3662.
    low, high = wilson_interval(81, 263)
    assert (round(low, 4), round(high, 4)) == (0.2553, 0.3662)


def test_wilson_edges_and_fractional_successes() -> None:
    assert wilson_interval(0, 10)[0] == 0.0
    assert wilson_interval(10, 10)[1] == 1.0
    low, high = wilson_interval(3.5, 10)
    assert low < 0.35 < high
    # monotone in the number of successes
    assert wilson_interval(3.5, 10)[0] < wilson_interval(4.0, 10)[0]


@pytest.mark.parametrize(
    ("k", "n", "conf"), [(1, 0, 0.95), (-1, 5, 0.95), (6, 5, 0.95), (1, 5, 1.0)]
)
def test_wilson_rejects_bad_input(k: float, n: int, conf: float) -> None:
    with pytest.raises(ValueError):
        wilson_interval(k, n, conf)


def test_mean_item_scores_keeps_first_seen_order() -> None:
    pairs = [("b", 1.0), ("a", 0.0), ("b", 0.0), ("a", 1.0), ("a", 1.0)]
    means = mean_item_scores(pairs)
    assert list(means) == ["b", "a"]
    assert means == {"b": 0.5, "a": pytest.approx(2 / 3)}


def _clustered_brute(s: list[float], c: list[int]) -> float:
    n = len(s)
    m = sum(s) / n
    var_clt = sum((x - m) ** 2 for x in s) / (n - 1) / n
    cross = sum(
        (s[i] - m) * (s[j] - m) for i in range(n) for j in range(n) if i != j and c[i] == c[j]
    )
    return math.sqrt(max(var_clt + cross / n**2, 0.0))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0, 1, allow_nan=False), st.integers(0, 4)), min_size=2, max_size=25
    )
)
def test_clustered_se_matches_the_formula(rows: list[tuple[float, int]]) -> None:
    s = [r[0] for r in rows]
    c = [r[1] for r in rows]
    assert clustered_se(s, c) == pytest.approx(_clustered_brute(s, c), rel=1e-9, abs=1e-12)


def test_clustered_se_singletons_is_the_clt_se_and_clusters_widen_it() -> None:
    rng = np.random.default_rng(0)
    s = rng.random(40)
    naive = float(np.std(s, ddof=1) / math.sqrt(len(s)))
    assert clustered_se(s, list(range(40))) == pytest.approx(naive, rel=1e-12)
    # samples repeated within items (perfect within-cluster correlation) widen the SE
    items = np.repeat(rng.integers(0, 2, 10).astype(float), 4)
    ids = np.repeat(np.arange(10), 4)
    assert clustered_se(items, ids) > clustered_se(items, np.arange(40))
    assert math.isnan(clustered_se([1.0], ["a"]))
