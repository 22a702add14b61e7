"""The paired preference (`shadow/paired_preference.py`): the rate, its bootstrap interval
against the normal approximation, and the sign test."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tuneloop.shadow import preference_figures
from tuneloop.stats import sign_test


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 30), st.integers(0, 30), st.integers(0, 30))
def test_the_rate_is_wins_and_half_the_ties_and_lies_in_its_interval(
    wins: int, ties: int, losses: int
) -> None:
    values = [1.0] * wins + [0.5] * ties + [0.0] * losses
    figures = preference_figures(values, wins, losses)
    if not values:
        assert figures.preference is None and figures.ci_low is None
        return
    n = len(values)
    assert figures.preference == (wins + ties / 2) / n
    assert figures.ci_low is not None and figures.ci_high is not None
    assert 0.0 <= figures.ci_low <= figures.preference <= figures.ci_high <= 1.0
    assert figures.sign_test_p == sign_test(wins, losses)


def test_the_interval_matches_the_normal_approximation_for_many_pairs() -> None:
    values = np.array([1.0] * 300 + [0.5] * 100 + [0.0] * 200)
    figures = preference_figures(values.tolist(), 300, 200)
    half = 1.959964 * values.std() / math.sqrt(len(values))
    assert figures.ci_low is not None and figures.ci_high is not None
    assert abs((figures.ci_high - figures.ci_low) / 2 - half) < 0.004
    assert abs(figures.preference - 0.5833333) < 1e-6  # type: ignore[operator]
    assert "bootstrap" in figures.method and figures.confidence == 0.95
