"""Per-arm summaries: Wilson intervals, item means, and clustered standard errors.

Pure functions over plain numbers (numpy + scipy only). Run the checks with
`pytest tests/stats/test_proportions.py`.

Deliberate choices:
- `wilson_interval` reproduces scipy's `binomtest(k, n).proportion_ci(method="wilson")`
  (Wilson 1927, as written by Newcombe 1998), including its convention that the bound at
  k = 0 is exactly 0 and at k = n exactly 1. Unlike scipy it accepts a fractional
  `successes` (the sum of item scores in [0, 1]), which is how the report uses it.
- `clustered_se` is Miller (2024), "Adding Error Bars to Evals", eq. for SE_clustered:
  the CLT variance (sample variance with n - 1, over n) plus the within-cluster cross terms
  over n², as printed (so it mixes an n − 1 and an n denominator). A negative total
  (strongly anti-correlated clusters) is floored at 0 rather than producing a complex SE.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import ndtri


def wilson_interval(successes: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Two-sided Wilson score interval for a proportion (Wilson 1927; Newcombe 1998).

    `successes` may be fractional (a sum of scores in [0, 1]). Raises ValueError for n < 1
    or successes outside [0, n].
    """
    if n < 1:
        raise ValueError(f"wilson_interval needs n >= 1, got {n}")
    if not 0 <= successes <= n:
        raise ValueError(f"successes must lie in [0, n={n}], got {successes}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    p = successes / n
    q = 1.0 - p
    z = float(ndtri(0.5 + 0.5 * confidence))
    denom = 2.0 * (n + z**2)
    center = (2.0 * n * p + z**2) / denom
    delta = z / denom * math.sqrt(4.0 * n * p * q + z**2)
    low = 0.0 if successes == 0 else center - delta
    high = 1.0 if successes == n else center + delta
    return low, high


def mean_item_scores(pairs: Iterable[tuple[Hashable, float]]) -> dict[Hashable, float]:
    """Mean score per item from (item id, sample score) pairs, in first-seen order.

    The item score is the pass@1 estimate of that item; the suite score is the unweighted
    mean of item scores, so every item counts once whatever its number of samples.
    """
    sums: dict[Hashable, float] = {}
    counts: dict[Hashable, int] = {}
    for key, value in pairs:
        sums[key] = sums.get(key, 0.0) + float(value)
        counts[key] = counts.get(key, 0) + 1
    return {key: sums[key] / counts[key] for key in sums}


def clustered_se(scores: ArrayLike, clusters: Sequence[Hashable] | np.ndarray) -> float:
    """Standard error of the mean of `scores` with observations clustered (Miller 2024).

    SE² = SE²_CLT + (1/n²) Σ_c Σ_i Σ_{j≠i} (s_ic − s̄)(s_jc − s̄), where
    SE²_CLT = Σ (s_i − s̄)² / ((n − 1) n). The cross terms of a cluster equal
    (Σ_i r_i)² − Σ_i r_i² with r = s − s̄, which is how they are computed here.
    Returns nan for fewer than two observations.
    """
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 1 or len(s) != len(clusters):
        raise ValueError("scores and clusters must be 1-D sequences of the same length")
    n = len(s)
    if n < 2:
        return math.nan
    r = s - s.mean()
    var_clt = float(np.sum(r**2)) / ((n - 1) * n)
    index: dict[Hashable, int] = {}
    codes = np.fromiter((index.setdefault(c, len(index)) for c in clusters), np.int64, n)
    cluster_sums = np.bincount(codes, weights=r)
    cluster_sq = np.bincount(codes, weights=r**2)
    cross = float(np.sum(cluster_sums**2 - cluster_sq)) / n**2
    return math.sqrt(max(var_clt + cross, 0.0))
