"""Paired item-level comparisons: exact sign test, Cohen's d_z, flip counts.

Pure functions over per-item scores of two arms on the same items. Run the checks with
`pytest tests/stats/test_paired.py`.

- `sign_test` is the exact binomial test on discordant items (Dixon & Mood 1946; for binary
  outcomes it is the exact McNemar test) with p = 1/2. Tails come from `scipy.special.bdtr`
  (the binomial CDF), avoiding the slow import of `scipy.stats`; the two-sided p-value is
  `scipy.stats.binomtest`'s (for p = 1/2 it is 2 · the smaller tail, capped at 1).
  Ties (unchanged items) carry no information and are left out by the caller.
- `cohens_dz` is mean(d) / sd(d) with the n − 1 sample standard deviation (Cohen 1988,
  d_z for paired designs; Lakens 2013, eq. 6).
- `flip_counts` calls an item "right" when its item score is ≥ 0.5 (a majority of its
  samples pass); with one binary sample per item that is simply "the sample passed".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import bdtr, bdtrc

RIGHT_THRESHOLD = 0.5


def sign_test(wins: int, losses: int, alternative: str = "two-sided") -> float:
    """Exact binomial p-value of `wins` among `wins + losses` discordant items under p = 1/2.

    "greater" tests wins > losses (post better). No discordant items gives p = 1.
    """
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(
            f"alternative must be 'two-sided', 'greater' or 'less', got {alternative!r}"
        )
    if wins < 0 or losses < 0:
        raise ValueError(f"wins and losses must be >= 0, got {wins}, {losses}")
    if wins + losses == 0:
        return 1.0
    n = int(wins + losses)
    p_less = float(bdtr(int(wins), n, 0.5))  # P(X ≤ wins)
    p_greater = 1.0 if wins == 0 else float(bdtrc(int(wins) - 1, n, 0.5))  # P(X ≥ wins)
    if alternative == "less":
        return p_less
    if alternative == "greater":
        return p_greater
    if 2 * wins == n:
        return 1.0
    return min(1.0, 2.0 * min(p_less, p_greater))


def cohens_dz(diffs: ArrayLike) -> float:
    """Cohen's d_z = mean(d) / sd(d) (ddof = 1). nan for < 2 items; ±inf if sd = 0 ≠ mean."""
    d = np.asarray(diffs, dtype=np.float64)
    if len(d) < 2:
        return math.nan
    mean = float(d.mean())
    sd = float(d.std(ddof=1))
    if sd == 0.0:
        return 0.0 if mean == 0.0 else math.copysign(math.inf, mean)
    return mean / sd


@dataclass(frozen=True)
class FlipCounts:
    """How items moved between the arms, with "right" meaning item score ≥ threshold.

    Also the `flips` part of the delta report (`delta.json`): one definition for both.
    """

    threshold: float
    """Item score at or above which an item counts as right."""
    wrong_to_right: int
    """Items wrong before and right after."""
    right_to_wrong: int
    """Items right before and wrong after."""
    both_right: int
    """Items right in both arms."""
    both_wrong: int
    """Items wrong in both arms."""
    improved: int
    """Items whose score rose (any amount): the sign test's wins."""
    worsened: int
    """Items whose score fell: the sign test's losses."""
    unchanged: int
    """Items with identical scores (ties, dropped by the sign test)."""


def flip_counts(pre: ArrayLike, post: ArrayLike, threshold: float = RIGHT_THRESHOLD) -> FlipCounts:
    """Count flips between two arms' item scores (same items, same order)."""
    a = np.asarray(pre, dtype=np.float64)
    b = np.asarray(post, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError("pre and post must be 1-D and of the same length")
    ra, rb = a >= threshold, b >= threshold
    return FlipCounts(
        threshold=float(threshold),
        wrong_to_right=int(np.sum(~ra & rb)),
        right_to_wrong=int(np.sum(ra & ~rb)),
        both_right=int(np.sum(ra & rb)),
        both_wrong=int(np.sum(~ra & ~rb)),
        improved=int(np.sum(b > a)),
        worsened=int(np.sum(b < a)),
        unchanged=int(np.sum(b == a)),
    )
