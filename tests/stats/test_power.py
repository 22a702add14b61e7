"""Paired-difference power analysis (Miller 2024)."""

from __future__ import annotations

import math

import pytest
from scipy.stats import norm

from tuneloop.stats import items_needed, min_detectable_effect


def test_mde_formula() -> None:
    z = norm.ppf(0.975) + norm.ppf(0.8)
    assert min_detectable_effect(400, 0.3) == pytest.approx(z * 0.3 / 20, rel=1e-14)
    one = norm.ppf(0.95) + norm.ppf(0.8)
    assert min_detectable_effect(400, 0.3, two_sided=False) == pytest.approx(one * 0.3 / 20)


def test_items_needed_known_value_and_round_trip() -> None:
    # (1.959964 + 0.841621)^2 * 0.5^2 / 0.05^2 = 784.88 → 785
    assert items_needed(0.05, 0.5) == 785
    for n in [30, 200, 1000]:
        mde = min_detectable_effect(n, 0.4)
        # the MDE of n items needs at most n items (ceil of n up to float noise)
        assert items_needed(mde * (1 + 1e-9), 0.4) <= n
        assert items_needed(mde * 0.99, 0.4) > n


def test_power_rejects_bad_input() -> None:
    for call in [
        lambda: items_needed(0.0, 0.3),
        lambda: items_needed(0.1, -1.0),
        lambda: min_detectable_effect(0, 0.3),
        lambda: min_detectable_effect(10, 0.3, alpha=1.5),
        lambda: min_detectable_effect(10, 0.3, power=0.0),
    ]:
        with pytest.raises(ValueError):
            call()
    assert math.isclose(min_detectable_effect(10, 0.0), 0.0)
