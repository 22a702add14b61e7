"""Paired permutation test: exact against scipy's enumeration; lattice = enumeration;
Monte Carlo close to exact; p-values uniform under the null."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest, permutation_test

import tuneloop.stats.permutation as perm
from tuneloop.stats import paired_permutation, paired_permutation_test, sign_test

ALTS = ["two-sided", "greater", "less"]


def _scipy(pre: np.ndarray, post: np.ndarray, alternative: str) -> float:
    res = permutation_test(
        (post, pre),
        lambda x, y, axis: np.mean(x - y, axis=axis),
        permutation_type="samples",
        alternative=alternative,
        n_resamples=np.inf,
        vectorized=True,
    )
    return float(res.pvalue)


@pytest.mark.parametrize("seed", range(6))
def test_matches_scipy_exact_enumeration(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 11
    if seed % 2:
        pre, post = rng.normal(size=n), rng.normal(0.5, size=n)  # continuous
    else:
        pre, post = rng.integers(0, 5, n) / 4, rng.integers(0, 5, n) / 4  # grid with ties
    result = paired_permutation(post - pre)
    assert result.exact
    for alt in ALTS:
        assert result.p(alt) == pytest.approx(_scipy(pre, post, alt), abs=1e-12)


def test_lattice_equals_enumeration(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7)
    d = (rng.integers(0, 9, 60) - rng.integers(0, 9, 60)) / 8
    lattice = paired_permutation(d)
    assert lattice.method == "lattice"
    monkeypatch.setattr(perm, "MAX_PATTERNS", 10**9)
    enumerated = paired_permutation(d)
    assert enumerated.method == "enumeration"
    for alt in ALTS:
        assert lattice.p(alt) == pytest.approx(enumerated.p(alt), rel=1e-9, abs=1e-14)


def test_monte_carlo_is_close_seeded_and_never_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(8)
    d = rng.normal(0.3, 1.0, 18)
    exact = paired_permutation(d)  # continuous, 2^18 patterns: exact only if forced
    assert exact.method == "monte_carlo"
    monkeypatch.setattr(perm, "MAX_PATTERNS", 2**18)
    truth = paired_permutation(d)
    monkeypatch.undo()
    assert truth.method == "enumeration"
    mc = paired_permutation(d, n_resamples=20_000, seed=1)
    se = np.sqrt(truth.p_greater * (1 - truth.p_greater) / 20_000)
    assert abs(mc.p_greater - truth.p_greater) < 5 * se + 1e-4
    assert paired_permutation(d, n_resamples=500, seed=3) == paired_permutation(
        d, n_resamples=500, seed=3
    )
    extreme = paired_permutation(np.linspace(1, 2, 200) + rng.random(200) * 1e-3, n_resamples=99)
    assert extreme.p_greater == pytest.approx(1 / 100)


def test_single_binary_sample_is_the_exact_sign_test() -> None:
    rng = np.random.default_rng(9)
    pre = rng.integers(0, 2, 80).astype(float)
    post = rng.integers(0, 2, 80).astype(float)
    wins, losses = int(np.sum(post > pre)), int(np.sum(post < pre))
    for alt in ALTS:
        assert paired_permutation_test(post - pre, alt) == pytest.approx(
            sign_test(wins, losses, alt), rel=1e-9
        )
    assert sign_test(wins, losses) == pytest.approx(binomtest(wins, wins + losses).pvalue)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-4, 4), min_size=1, max_size=40))
def test_swapping_arms_swaps_the_tails(ints: list[int]) -> None:
    d = np.array(ints) / 4
    a, b = paired_permutation(d), paired_permutation(-d)
    assert a.p_greater == pytest.approx(b.p_less, abs=1e-12)
    assert a.p_two_sided == pytest.approx(b.p_two_sided, abs=1e-12)
    assert 0 < a.p_two_sided <= 1


def test_all_ties_give_p_one() -> None:
    r = paired_permutation([0.0, 0.0, 0.0])
    assert (r.p_greater, r.p_less, r.p_two_sided) == (1.0, 1.0, 1.0)
    with pytest.raises(ValueError):
        paired_permutation_test([0.1], "bigger")
    with pytest.raises(ValueError):
        paired_permutation([])


def test_p_values_are_uniform_under_the_null() -> None:
    # Continuous symmetric differences: the exact test has P(p ≤ a) = a up to the lattice
    # of 2^12 patterns. 400 simulations; bounds are ~4 binomial standard errors.
    rng = np.random.default_rng(10)
    p = np.array([paired_permutation(rng.normal(size=12)).p_two_sided for _ in range(400)])
    for a in (0.05, 0.2, 0.5):
        share = np.mean(p <= a)
        assert abs(share - a) < 4 * np.sqrt(a * (1 - a) / 400)
