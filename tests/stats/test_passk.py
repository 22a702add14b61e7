"""Unbiased pass@k (Chen et al. 2021) against the naive binomial formula."""

from __future__ import annotations

from fractions import Fraction
from math import comb

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tuneloop.stats import pass_at_k, pass_at_k_curve, pass_at_k_matrix


def _naive(n: int, c: int, k: int) -> float:
    return float(1 - Fraction(comb(n - c, k), comb(n, k)))


def test_matches_naive_formula_exhaustively_for_small_n() -> None:
    for n in range(1, 21):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(_naive(n, c, k), abs=1e-12)


def test_large_n_is_stable_and_exact() -> None:
    # Chen et al. use n = 200 samples per problem; the naive floats overflow there.
    for c, k in [(1, 1), (10, 1), (10, 10), (10, 100), (150, 100)]:
        assert pass_at_k(200, c, k) == pytest.approx(_naive(200, c, k), abs=1e-12)


def test_edges() -> None:
    assert pass_at_k(10, 0, 5) == 0.0
    assert pass_at_k(10, 6, 5) == 1.0  # n - c < k
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    for bad in [(5, 1, 0), (5, 1, 6), (5, 6, 1), (5, -1, 1)]:
        with pytest.raises(ValueError):
            pass_at_k(*bad)


@given(st.integers(1, 30).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))))
def test_monotone_in_k_and_pass1_is_fraction(nc: tuple[int, int]) -> None:
    n, c = nc
    curve = [pass_at_k(n, c, k) for k in range(1, n + 1)]
    assert curve[0] == pytest.approx(c / n)
    assert all(a <= b + 1e-15 for a, b in zip(curve, curve[1:], strict=False))
    assert all(0.0 <= v <= 1.0 for v in curve)


def test_matrix_and_curve() -> None:
    m = pass_at_k_matrix(4, [0, 1, 4, 1], [1, 2])
    assert m.shape == (4, 2)
    assert m[1].tolist() == m[3].tolist() == [0.25, 0.5]
    curve = pass_at_k_curve(4, [0, 1, 4, 1])
    assert len(curve) == 4
    assert curve[0] == pytest.approx((0 + 0.25 + 1 + 0.25) / 4)
    with pytest.raises(ValueError):
        pass_at_k_curve(4, [])
