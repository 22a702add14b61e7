"""The paired preference of a challenger over a champion, from per-pair judge outcomes.

    figures = preference_figures(values=[1, 0.5, 0, 1], wins=2, losses=1)

Pure; the methods are `tuneloop.stats`':

- preference = mean of the per-pair values (1 the challenger preferred in both orders, 0.5 a
  tie or a disagreement between the orders, 0 the champion preferred) = (wins + ties/2) / n;
- its interval: the percentile bootstrap over pairs (Efron & Tibshirani 1993, §13.3), 10,000
  seeded resamples (`stats.bootstrap_means`, which draws them from the exact distribution of
  the resampled mean, the values lying on a 1/2 grid). Chosen over the Wilson interval, which
  would treat a tie as half a Bernoulli success and so overstate the variance of a
  three-valued outcome;
- the exact two-sided sign test of wins against losses, ties left out (Dixon & Mood 1946;
  `stats.sign_test`).

With no judged pair every figure is None.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from tuneloop.stats import bootstrap_means, percentile_interval, sign_test

CONFIDENCE = 0.95
RESAMPLES = 10_000
SEED = 0
METHOD = f"percentile bootstrap over pairs ({RESAMPLES} resamples, seed {SEED})"


class PreferenceFigures(NamedTuple):
    preference: float | None
    """(wins + ties/2) / n."""
    ci_low: float | None
    ci_high: float | None
    sign_test_p: float | None
    """Two-sided exact sign test of wins against losses."""
    confidence: float
    method: str


def preference_figures(values: Sequence[float], wins: int, losses: int) -> PreferenceFigures:
    """The preference, its bootstrap interval and the sign test (module docstring)."""
    if not values:
        return PreferenceFigures(None, None, None, None, CONFIDENCE, METHOD)
    x = np.asarray(values, dtype=np.float64)
    low, high = percentile_interval(bootstrap_means(x, RESAMPLES, SEED), CONFIDENCE)
    return PreferenceFigures(
        float(x.mean()), float(low), float(high), sign_test(wins, losses), CONFIDENCE, METHOD
    )
