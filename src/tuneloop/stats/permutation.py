"""Paired sign-flip permutation test on per-item differences, exact whenever feasible.

Under H0 (the two arms are exchangeable within an item) each difference d_i keeps its
magnitude and takes either sign with probability 1/2; the statistic is the mean difference.
Zeros never change the statistic, so they are dropped before counting patterns. Three ways
to get the null distribution, tried in order:

1. **Enumeration over the multiset of |d|.** Equal magnitudes are interchangeable, so a
   group of g equal values contributes v·(2j − g) with j ~ Binomial(g, 1/2); the number of
   distinct patterns is Π(g + 1) rather than 2^m. Used when that is ≤ 2^16.
2. **Lattice convolution.** When every |d| is an integer multiple of a common unit 1/L
   (item means of n binary samples are multiples of 1/n, so their differences are too), the
   null of the integer sum is an exact convolution over a grid of 2·Σ|d|·L + 1 points.
   Ties are exact integers here, so no floating tolerance is involved.
3. **Seeded Monte Carlo** with the +1 correction of Phipson & Smyth (2010):
   p = (b + 1) / (B + 1), never 0.

p-values follow `scipy.stats.permutation_test(..., permutation_type="samples")`: "greater"
counts null statistics ≥ the observed one (with a small relative tolerance for float ties),
"less" counts ≤, and "two-sided" is min(1, 2·min(p_less, p_greater)) — for the symmetric
sign-flip null this equals P(|T| ≥ |t|) when exact. "greater" means post > pre.
For one binary sample per item this test is the exact sign (McNemar) test.
Run the checks with `pytest tests/stats/test_permutation.py`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import comb

from tuneloop.stats._lattice import lattice_unit

MAX_PATTERNS = 2**16
MAX_LATTICE_WORK = 60_000_000
_CHUNK = 1000
# scipy's tolerance for "theoretically equal" statistics: 100 ulp relative to the observed
# value; ours is relative to Σ|d| as well, so an observed value of 0 still tolerates
# summation-order noise.
_REL_TOL = 100 * np.finfo(np.float64).eps

Alternative = str  # "two-sided" | "greater" | "less"


@dataclass(frozen=True)
class PermutationResult:
    """All three p-values of one paired permutation test, and how they were obtained."""

    statistic: float
    """Observed mean difference (post − pre), zeros included."""
    p_greater: float
    """P(T ≥ t) under H0: evidence that post > pre."""
    p_less: float
    """P(T ≤ t) under H0: evidence that post < pre."""
    p_two_sided: float
    """min(1, 2·min(p_less, p_greater))."""
    method: str
    """`enumeration`, `lattice` or `monte_carlo`."""
    n_resamples: int
    """Monte Carlo resamples drawn (0 when exact)."""

    @property
    def exact(self) -> bool:
        return self.method != "monte_carlo"

    def p(self, alternative: Alternative) -> float:
        return {"two-sided": self.p_two_sided, "greater": self.p_greater, "less": self.p_less}[
            _check_alternative(alternative)
        ]


def _check_alternative(alternative: str) -> str:
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(
            f"alternative must be 'two-sided', 'greater' or 'less', got {alternative!r}"
        )
    return alternative


def paired_permutation_test(
    diffs: ArrayLike,
    alternative: Alternative = "two-sided",
    n_resamples: int = 10_000,
    seed: int = 0,
) -> float:
    """p-value of the paired sign-flip permutation test on `diffs` = post − pre."""
    _check_alternative(alternative)
    return paired_permutation(diffs, n_resamples=n_resamples, seed=seed).p(alternative)


def paired_permutation(
    diffs: ArrayLike, n_resamples: int = 10_000, seed: int = 0
) -> PermutationResult:
    """Every p-value of the paired permutation test (exact when feasible, else Monte Carlo)."""
    d = np.asarray(diffs, dtype=np.float64)
    if d.ndim != 1 or len(d) == 0:
        raise ValueError("diffs must be a non-empty 1-D sequence")
    if not np.all(np.isfinite(d)):
        raise ValueError("diffs must be finite")
    statistic = float(d.mean())
    signed = d[d != 0]
    if len(signed) == 0:
        return PermutationResult(statistic, 1.0, 1.0, 1.0, "enumeration", 0)
    values, groups = np.unique(np.abs(signed), return_counts=True)
    if math.prod(int(g) + 1 for g in groups) <= MAX_PATTERNS:
        p_ge, p_le = _enumerate(signed, values, groups)
        method, drawn = "enumeration", 0
    elif (lattice := _lattice(signed, values, groups)) is not None:
        p_ge, p_le = lattice
        method, drawn = "lattice", 0
    else:
        p_ge, p_le = _monte_carlo(signed, n_resamples, seed)
        method, drawn = "monte_carlo", n_resamples
    two = min(1.0, 2.0 * min(p_ge, p_le))
    return PermutationResult(statistic, min(p_ge, 1.0), min(p_le, 1.0), two, method, drawn)


def _tolerance(signed: np.ndarray, observed: float) -> float:
    return float(_REL_TOL * max(abs(observed), float(np.abs(signed).sum()) / len(signed)))


def _enumerate(signed: np.ndarray, values: np.ndarray, groups: np.ndarray) -> tuple[float, float]:
    """Exact tails by combining each group's binomial contribution (outer sums)."""
    sums = np.zeros(1)
    probs = np.ones(1)
    for v, g in zip(values, groups, strict=True):
        j = np.arange(g + 1)
        contrib = v * (2 * j - g)
        weight = comb(g, j) / 2.0**g
        sums = (sums[:, None] + contrib[None, :]).ravel()
        probs = (probs[:, None] * weight[None, :]).ravel()
    observed = float(signed.sum())
    gamma = _tolerance(signed, observed)
    return float(probs[sums >= observed - gamma].sum()), float(
        probs[sums <= observed + gamma].sum()
    )


def _lattice(
    signed: np.ndarray, values: np.ndarray, groups: np.ndarray
) -> tuple[float, float] | None:
    """Exact tails by convolution on the integer grid, or None when there is no small grid."""
    unit = lattice_unit(values)
    if unit is None:
        return None
    steps = np.rint(values * unit).astype(np.int64)
    total = int(np.dot(steps, groups))
    width = 2 * total + 1
    if int(groups.sum() + len(groups)) * width > MAX_LATTICE_WORK:
        return None
    dist = np.zeros(width)
    dist[total] = 1.0  # index = integer sum + total
    for step, g in zip(steps, groups, strict=True):
        dist = _convolve_group(dist, int(step), int(g))
    observed = int(np.dot(np.sign(signed).astype(np.int64), np.rint(np.abs(signed) * unit)))
    at = observed + total
    return float(dist[at:].sum()), float(dist[: at + 1].sum())


def _convolve_group(dist: np.ndarray, step: int, g: int) -> np.ndarray:
    """Add g independent ±step terms: shift by step·(2j − g) with weight C(g, j)/2^g."""
    out = np.zeros_like(dist)
    n = len(dist)
    weights = comb(g, np.arange(g + 1)) / 2.0**g
    for j, w in enumerate(weights):
        shift = step * (2 * j - g)
        if shift >= 0:
            out[shift:] += w * dist[: n - shift]
        else:
            out[:shift] += w * dist[-shift:]
    return out


def _monte_carlo(signed: np.ndarray, n_resamples: int, seed: int) -> tuple[float, float]:
    """Seeded random sign flips; p = (b + 1)/(B + 1) (Phipson & Smyth 2010)."""
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    rng = np.random.default_rng(seed)
    magnitudes = np.abs(signed)
    observed = float(signed.sum())
    gamma = _tolerance(signed, observed)
    ge = le = 0
    for start in range(0, n_resamples, _CHUNK):
        rows = min(_CHUNK, n_resamples - start)
        flips = rng.integers(0, 2, size=(rows, len(signed)), dtype=np.int8) * 2 - 1
        null = flips @ magnitudes
        ge += int(np.count_nonzero(null >= observed - gamma))
        le += int(np.count_nonzero(null <= observed + gamma))
    return (ge + 1) / (n_resamples + 1), (le + 1) / (n_resamples + 1)
