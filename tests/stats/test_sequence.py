"""Alpha spending and LORD++ against their published formulas (Ramdas et al. 2017)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tuneloop.stats import (
    lord_alpha,
    lord_gamma,
    lord_gammas,
    lord_wealth,
    spending_alpha,
    spent_alpha,
)
from tuneloop.stats.sequence import LORD_C

ALPHA = 0.05
G1, G2, G3, G4 = (  # C·log(max(j, 2)) / (j·exp(√log j)), by hand
    LORD_C * math.log(2),
    LORD_C * math.log(2) / (2 * math.exp(math.sqrt(math.log(2)))),
    LORD_C * math.log(3) / (3 * math.exp(math.sqrt(math.log(3)))),
    LORD_C * math.log(4) / (4 * math.exp(math.sqrt(math.log(4)))),
)


def test_basel_vectors() -> None:
    assert spending_alpha(1, ALPHA) == pytest.approx(0.030396355092701, rel=1e-12)  # 0.3/π²
    assert spending_alpha(2, ALPHA) == pytest.approx(0.030396355092701 / 4, rel=1e-12)
    assert spending_alpha(20, ALPHA) == pytest.approx(ALPHA / 657.97, rel=1e-5)
    # Σ_{j ≤ 20} 1/j² = 1.5961632439130233 → 0.05 · 6/π² · 1.59616… = 0.0485175…
    assert spent_alpha(20, ALPHA) == pytest.approx(0.048517544747898, rel=1e-12)
    assert spent_alpha(1, ALPHA) == pytest.approx(spending_alpha(1, ALPHA), rel=1e-12)
    assert spent_alpha(10**9, ALPHA) <= ALPHA


def test_geometric_and_uniform_vectors() -> None:
    assert [spending_alpha(k, ALPHA, "geometric") for k in (1, 2, 3)] == pytest.approx(
        [0.025, 0.0125, 0.00625]
    )
    assert spent_alpha(3, ALPHA, "geometric") == pytest.approx(0.04375)
    assert spending_alpha(1, ALPHA, "geometric", ratio=0.9) == pytest.approx(0.005)
    assert spending_alpha(2, ALPHA, "geometric", ratio=0.9) == pytest.approx(0.0045)
    assert spending_alpha(20, ALPHA, "uniform", horizon=20) == pytest.approx(0.0025)
    assert spending_alpha(21, ALPHA, "uniform", horizon=20) == 0.0
    assert spent_alpha(10, ALPHA, "uniform", horizon=20) == pytest.approx(0.025)
    assert spent_alpha(25, ALPHA, "uniform", horizon=20) == pytest.approx(ALPHA)


SERIES_ARGS: st.SearchStrategy[tuple[str, dict[str, Any]]] = st.one_of(
    st.just(("basel", {})),
    st.tuples(st.just("geometric"), st.fixed_dictionaries({"ratio": st.floats(0.01, 0.99)})),
    st.tuples(st.just("uniform"), st.fixed_dictionaries({"horizon": st.integers(1, 100)})),
)


@given(st.integers(1, 300), st.floats(0.001, 0.5), SERIES_ARGS)
def test_spending_never_exceeds_alpha(
    k: int, alpha: float, series_args: tuple[str, dict[str, Any]]
) -> None:
    series, kw = series_args
    levels = [spending_alpha(j, alpha, series, **kw) for j in range(1, k + 1)]
    assert all(level >= 0 for level in levels)
    assert all(a >= b for a, b in zip(levels, levels[1:], strict=False))  # nonincreasing
    spent = spent_alpha(k, alpha, series, **kw)
    assert spent <= alpha * (1 + 1e-12)
    assert spent == pytest.approx(math.fsum(levels), rel=1e-9, abs=1e-15)


def test_spending_refusals() -> None:
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="k must be an integer"):
            spending_alpha(bad, ALPHA)  # type: ignore[arg-type]
    for alpha in (0.0, 1.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="alpha must be in"):
            spent_alpha(1, alpha)
    with pytest.raises(ValueError, match="did you mean 'basel'"):
        spending_alpha(1, ALPHA, "basle")
    with pytest.raises(ValueError, match="known: basel, geometric, uniform"):
        spending_alpha(1, ALPHA, "harmonic")
    for ratio in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match="ratio"):
            spending_alpha(1, ALPHA, "geometric", ratio=ratio)
    with pytest.raises(ValueError, match="needs a horizon"):
        spending_alpha(1, ALPHA, "uniform")
    with pytest.raises(ValueError, match="horizon must be"):
        spent_alpha(1, ALPHA, "uniform", horizon=0)


def test_lord_gamma_values_and_shape() -> None:
    assert [lord_gamma(j) for j in (1, 2, 3, 4)] == pytest.approx([G1, G2, G3, G4], rel=1e-12)
    assert lord_gamma(1) == pytest.approx(0.0535167709126, rel=1e-11)  # C·log 2
    gammas = lord_gammas(10**6)
    assert gammas[[0, 1, 999]] == pytest.approx([G1, G2, lord_gamma(1000)], rel=1e-12)
    assert np.all(np.diff(gammas) <= 0)  # nonincreasing from j = 1
    with pytest.raises(ValueError):
        lord_gamma(0)


def test_lord_gamma_sum() -> None:
    """Σγ ≈ 0.9763: the partial sum to 10⁶ (0.522) plus the tail, bracketed by integrals.

    For x ≥ 2, f(x) = C·log x / (x·exp(√log x)) decreases, so ∫_{N+1}^∞ f ≤ Σ_{j>N} f(j) ≤
    ∫_N^∞ f, and with u = √log x, ∫_X^∞ f = 2C·e^(−U)·(U³ + 3U² + 6U + 6), U = √log X.
    """
    n = 10**6
    partial = math.fsum(lord_gammas(n))
    assert partial == pytest.approx(0.52174, abs=1e-5)  # the sum converges very slowly

    def tail(x: float) -> float:
        u = math.sqrt(math.log(x))
        return 2 * LORD_C * math.exp(-u) * (u**3 + 3 * u**2 + 6 * u + 6)

    low, high = partial + tail(n + 1), partial + tail(n)
    assert 0.97630 < low <= high < 0.97632  # Σγ = 0.976308…, ≤ 1 as LORD++ needs
    assert math.fsum(lord_gammas(20)) == pytest.approx(0.14149, abs=1e-5)


def test_lord_vectors() -> None:
    w0 = ALPHA / 2
    assert lord_alpha(1, ALPHA, []) == pytest.approx(w0 * G1, rel=1e-12)  # 0.0013379…
    assert lord_alpha(1, ALPHA, []) == pytest.approx(0.0013379192728, rel=1e-10)
    assert lord_alpha(2, ALPHA, [1]) == pytest.approx(w0 * G2 + (ALPHA - w0) * G1, rel=1e-12)
    assert lord_alpha(4, ALPHA, [1, 3]) == pytest.approx(
        w0 * G4 + (ALPHA - w0) * G3 + ALPHA * G1, rel=1e-12
    )
    assert lord_alpha(4, ALPHA, [3, 1]) == lord_alpha(4, ALPHA, [1, 3])  # any order
    assert lord_alpha(3, ALPHA, [], w0=ALPHA) == pytest.approx(ALPHA * G3, rel=1e-12)
    assert lord_alpha(3, ALPHA, [1], w0=0.01) == pytest.approx(0.01 * G3 + 0.04 * G2, rel=1e-12)
    assert lord_wealth(1, ALPHA, []) == pytest.approx(w0)
    assert lord_wealth(2, ALPHA, []) == pytest.approx(w0 * (1 - G1), rel=1e-12)
    assert lord_wealth(2, ALPHA, [1]) == pytest.approx(ALPHA - w0 * G1, rel=1e-12)
    # W0 − (α_1 + α_2 + α_3) + (α − W0) + α, with α_2 = W0γ2 + (α−W0)γ1, α_3 = W0γ3 + (α−W0)γ2
    spent = w0 * (G1 + G2 + G3) + (ALPHA - w0) * (G1 + G2)
    assert lord_wealth(4, ALPHA, [1, 3]) == pytest.approx(
        w0 - spent + (ALPHA - w0) + ALPHA, rel=1e-12
    )


rejection_sets = st.integers(1, 60).flatmap(
    lambda t: st.tuples(st.just(t), st.sets(st.integers(1, t), max_size=t))
)


@given(rejection_sets, st.floats(0.001, 0.5), st.floats(0.0, 1.0))
def test_lord_properties(t_rejected: tuple[int, set[int]], alpha: float, w_frac: float) -> None:
    horizon, rejected = t_rejected
    w0 = alpha * w_frac
    first = min(rejected, default=None)
    wealth = w0  # W0 − the levels paid + the payouts, step by step
    for t in range(1, horizon + 1):
        before = sorted(r for r in rejected if r < t)
        level = lord_alpha(t, alpha, before, w0)
        assert level >= 0
        assert lord_wealth(t, alpha, before, w0) == pytest.approx(wealth, rel=1e-9, abs=1e-15)
        assert level <= wealth + 1e-15  # the test can always be paid for
        payout = 0.0 if t not in rejected else (alpha - w0 if t == first else alpha)
        wealth += payout - level
        assert wealth >= -1e-15  # never negative


@given(st.integers(1, 2000), st.floats(0.001, 0.5), st.floats(0.0, 1.0))
def test_lord_without_rejections_spends_at_most_w0(horizon: int, alpha: float, frac: float) -> None:
    # the union bound under the global null: P(any false promotion) ≤ Σ α_t ≤ W0 ≤ α
    w0 = alpha * frac
    levels = [lord_alpha(t, alpha, [], w0) for t in range(1, horizon + 1)]
    assert math.fsum(levels) <= w0 * (1 + 1e-12)
    assert math.fsum(levels) == pytest.approx(w0 * math.fsum(lord_gammas(horizon)), rel=1e-9)


def test_lord_refusals() -> None:
    with pytest.raises(ValueError, match="t must be an integer"):
        lord_alpha(0, ALPHA, [])
    with pytest.raises(ValueError, match="alpha must be in"):
        lord_wealth(1, 1.0, [])
    for w0 in (-0.01, 0.06):
        with pytest.raises(ValueError, match="w0 must be in"):
            lord_alpha(2, ALPHA, [], w0)
    for rejections in ([3], [2, 5], [0], [-1]):
        with pytest.raises(ValueError, match="earlier rounds"):
            lord_alpha(3, ALPHA, rejections)
    with pytest.raises(ValueError, match="distinct"):
        lord_wealth(5, ALPHA, [2, 2])
    with pytest.raises(ValueError, match="integer round numbers"):
        lord_alpha(5, ALPHA, [1.5])  # type: ignore[list-item]
