"""Population stability index."""

from __future__ import annotations

import math

import pytest

from tuneloop.stats import psi


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
