"""Paired bootstrap: mirror symmetry, grid path = index path in distribution, coverage."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tuneloop.stats.bootstrap as boot
from tuneloop.stats import bootstrap_coded_means, bootstrap_means, paired_bootstrap_ci

scores = st.lists(st.integers(0, 4), min_size=2, max_size=30)


@settings(max_examples=40, deadline=None)
@given(scores, st.integers(0, 2**16))
def test_swapping_arms_negates_delta_and_mirrors_ci(pre_i: list[int], seed: int) -> None:
    pre = np.array(pre_i) / 4
    post = np.roll(pre, 1)
    low, high = paired_bootstrap_ci(pre, post, n_resamples=501, seed=seed)
    low2, high2 = paired_bootstrap_ci(post, pre, n_resamples=501, seed=seed)
    assert (low2, high2) == pytest.approx((-high, -low), abs=1e-12)
    assert low <= high


def test_grid_path_agrees_with_index_path_in_distribution() -> None:
    rng = np.random.default_rng(0)
    d = (rng.binomial(16, 0.6, 300) - rng.binomial(16, 0.5, 300)) / 16
    grid = bootstrap_means(d, 20_000, seed=1)
    index = boot._index_means(d, 20_000, np.random.default_rng(2))
    assert grid.mean() == pytest.approx(d.mean(), abs=3e-3)
    assert grid.std() == pytest.approx(d.std() / np.sqrt(300), rel=0.03)
    for q in (0.025, 0.5, 0.975):
        assert np.quantile(grid, q) == pytest.approx(np.quantile(index, q), abs=4e-3)


def test_seeded_and_methods() -> None:
    rng = np.random.default_rng(1)
    pre, post = rng.random(50), rng.random(50) + 0.1  # continuous: index path
    assert paired_bootstrap_ci(pre, post, seed=4) == paired_bootstrap_ci(pre, post, seed=4)
    low, high = paired_bootstrap_ci(pre, post, n_resamples=2000)
    bl, bh = paired_bootstrap_ci(pre, post, n_resamples=2000, method="bca")
    assert low < (post - pre).mean() < high and bl < (post - pre).mean() < bh
    assert abs(bl - low) < 0.05 and abs(bh - high) < 0.05
    with pytest.raises(ValueError):
        paired_bootstrap_ci(pre, post, method="basic")
    with pytest.raises(ValueError):
        paired_bootstrap_ci(pre, post[:-1])
    assert paired_bootstrap_ci([0.5, 0.5], [0.5, 0.5]) == (0.0, 0.0)


def test_two_column_means_share_resamples() -> None:
    x = np.column_stack([np.arange(10.0), np.arange(10.0) * 2])
    m = bootstrap_means(x, 300, seed=0)
    assert m.shape == (300, 2)
    assert np.allclose(m[:, 1], 2 * m[:, 0])


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_coverage_is_near_nominal(method: str) -> None:
    # 200 simulated evals of 60 items × 4 binary samples with a true Δ of 0.05; a 90% CI
    # should cover it ~90% of the time (±4 binomial standard errors ≈ ±0.085).
    rng = np.random.default_rng(11)
    hits = 0
    sims = 200
    for _ in range(sims):
        p = rng.uniform(0.2, 0.8, 60)
        pre = rng.binomial(4, p) / 4
        post = rng.binomial(4, np.clip(p + 0.05, 0, 1)) / 4
        low, high = paired_bootstrap_ci(pre, post, 0.9, 2000, int(rng.integers(1 << 30)), method)
        truth = float(np.mean(np.clip(p + 0.05, 0, 1) - p))
        hits += low <= truth <= high
    assert abs(hits / sims - 0.9) < 4 * np.sqrt(0.09 / sims)


def test_coded_means_equal_plain_resampling_of_the_table_rows() -> None:
    codes = np.array([0, 2, 2, 1, 0, 2, 1, 1, 0, 2])
    table = np.array([[0.0, 1.0], [0.5, 0.25], [1.0, 0.0]])
    coded = bootstrap_coded_means(codes, table, 100, seed=5)
    plain = boot._index_means(table[codes], 100, np.random.default_rng(5))
    assert np.allclose(coded, plain, atol=1e-15)
    with pytest.raises(ValueError):
        bootstrap_coded_means([3], table)
