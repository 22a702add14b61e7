"""Population stability index."""

from __future__ import annotations

import math

import pytest

from tuneloop.stats import psi, quantile_edges, sample_psi


def test_psi_known_vector() -> None:
    e = [0.1, 0.2, 0.3, 0.4]
    a = [0.2, 0.2, 0.2, 0.4]
    expected = (0.2 - 0.1) * math.log(2.0) + (0.2 - 0.3) * math.log(0.2 / 0.3)
    assert psi(e, a) == pytest.approx(expected, rel=1e-14)


def test_psi_counts_are_normalised_and_identical_is_zero() -> None:
    assert psi([1, 2, 3, 4], [2, 2, 2, 4]) == pytest.approx(
        psi([0.1, 0.2, 0.3, 0.4], [0.2, 0.2, 0.2, 0.4])
    )
    assert psi([5, 5], [50, 50]) == 0.0


def test_psi_empty_bin_uses_eps() -> None:
    value = psi([0.5, 0.5], [1.0, 0.0], eps=1e-6)
    expected = (1.0 - 0.5) * math.log(1.0 / 0.5) + (1e-6 - 0.5) * math.log(1e-6 / 0.5)
    assert value == pytest.approx(expected, rel=1e-12)
    assert psi([0.5, 0.5], [1.0, 0.0], eps=1e-3) < value


def test_psi_rejects_bad_input() -> None:
    for e, a in [([1, 2], [1]), ([], []), ([0, 0], [1, 1]), ([-1, 2], [1, 1])]:
        with pytest.raises(ValueError):
            psi(e, a)


def test_quantile_edges_are_the_references_quantiles_with_ties_merged() -> None:
    assert quantile_edges([1, 2, 3, 4, 5], bins=4).tolist() == [2.0, 3.0, 4.0]
    assert quantile_edges([7, 7, 7, 7], bins=10).tolist() == [7.0]
    assert quantile_edges([1, 2, math.inf, math.inf], bins=2).tolist() == [2.0]
    for bad in ([], [1.0, float("nan")], [[1.0]]):
        with pytest.raises(ValueError):
            quantile_edges(bad)
    with pytest.raises(ValueError):
        quantile_edges([1, 2], bins=1)


def test_sample_psi_hand_computed() -> None:
    # reference 1..8 in quartile bins: edges = sorted[⌊q·7⌋] = 2, 4, 6 → 2 values in each;
    # actual [1, 2, 3, 3, 3, 4, 7, 8]: bins (≤2, ≤4, ≤6, >6) hold 2, 4, 0, 2
    reference = [1, 2, 3, 4, 5, 6, 7, 8]
    actual = [1, 2, 3, 3, 3, 4, 7, 8]
    eps = 1e-4
    e, a = [0.25] * 4, [0.25, 0.5, eps, 0.25]
    expected = sum((ai - ei) * math.log(ai / ei) for ai, ei in zip(a, e, strict=True))
    assert sample_psi(reference, actual, bins=4, eps=eps) == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(0.25 * math.log(2) + (eps - 0.25) * math.log(eps / 0.25))


def test_sample_psi_of_the_same_sample_is_zero_and_a_value_on_an_edge_falls_below_it() -> None:
    assert sample_psi([0.1, 0.2, 0.3, 0.4], [0.1, 0.2, 0.3, 0.4], bins=4) == 0.0
    # [0, 1] in halves: edge 0; 0 itself is in the lower bin, 0.5 in the upper like 1
    assert sample_psi([0.0, 1.0], [0.0, 0.5], bins=2) == 0.0
    # infinities (a margin's "certain") are values like any other
    assert sample_psi([0.0, math.inf], [-1.0, math.inf], bins=2) == 0.0
    with pytest.raises(ValueError):
        sample_psi([0.0, 1.0], [])
