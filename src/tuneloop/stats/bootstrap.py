"""Paired bootstrap over items (Koehn 2004; Efron & Tibshirani 1993), vectorized and seeded.

Items are resampled with replacement and the statistic is always a mean. Two paths:

- Grid data (1-D values that are multiples of 1/L, e.g. paired differences of item means of
  n binary samples): the exact distribution of the resampled sum is the n-fold convolution
  of the empirical pmf, computed once by FFT; each resample is one inverse-CDF draw from it.
  Same distribution as resampling items, at a fraction of the cost — this is where the
  ≥ 10× over `scipy.stats.bootstrap` comes from (`benchmarks/stats.py` times both paths).
- Anything else: resampled item indices are gathered and averaged, a chunk at a time. Every
  column of `values` shares the same resampled items, which keeps paired quantities
  (pass@k for each k) coherent within a resample.

Intervals: `percentile` (default; `np.quantile` with linear interpolation, as scipy) or
`bca` (bias-corrected and accelerated, Efron & Tibshirani 1993 eq. 14.9–14.15, with the
jackknife acceleration of the mean computed in closed form). Run the checks with
`pytest tests/stats/test_bootstrap.py`; the speed goal is `python benchmarks/stats.py`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy import fft as sp_fft
from scipy.special import ndtr, ndtri

from tuneloop.stats._lattice import lattice_unit

_GATHER = 1 << 21
_MAX_GRID = 1 << 22  # grid points of the resample sum's exact distribution


def bootstrap_means(values: np.ndarray, n_resamples: int = 10_000, seed: int = 0) -> np.ndarray:
    """Means of `values` (items, or items × columns) over seeded item resamples.

    Returns shape (n_resamples,) or (n_resamples, columns). 1-D values on a small grid take
    the exact-distribution path (`_lattice_means`); everything else resamples indices.
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim not in (1, 2) or x.shape[0] == 0:
        raise ValueError("values must be a non-empty (items,) or (items, columns) array")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    rng = np.random.default_rng(seed)
    if x.ndim == 1 and (unit := lattice_unit(x)) is not None:
        grid = np.rint(x * unit).astype(np.int64)
        if len(x) * int(grid.max() - grid.min()) < _MAX_GRID:
            return _lattice_means(grid, unit, n_resamples, rng)
    return _index_means(x, n_resamples, rng)


def _index_means(x: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Plain item resampling: gather each chunk of resampled rows and average them."""
    n = x.shape[0]
    width = 1 if x.ndim == 1 else x.shape[1]
    # chunks of ~2M gathered values keep the temporary array cache-friendly
    rows_per_chunk = max(1, _GATHER // (n * width))
    out = np.empty((n_resamples,) + x.shape[1:], dtype=np.float64)
    for start in range(0, n_resamples, rows_per_chunk):
        rows = min(rows_per_chunk, n_resamples - start)
        idx = rng.integers(0, n, size=(rows, n), dtype=np.int64)
        out[start : start + rows] = np.take(x, idx, axis=0).sum(axis=1) / n
    return out


def _lattice_means(
    grid: np.ndarray, unit: int, n_resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """Resample means drawn from the exact bootstrap distribution of a grid-valued mean.

    The sum of n items drawn with replacement is the n-fold convolution of the empirical
    pmf (Efron & Tibshirani 1993, §6.4, the "ideal" bootstrap distribution); computed by
    FFT, it is then sampled by inverse CDF. Each draw has exactly the distribution of one
    item-resampled mean, at the cost of one uniform number instead of n indices. (The
    index path's resample-by-resample stream differs, so the two paths agree in
    distribution, not draw by draw.)
    """
    n = len(grid)
    low = int(grid.min())
    shifted = grid - low
    width = int(shifted.max())
    pmf = np.bincount(shifted, minlength=width + 1) / n
    size = n * width + 1
    fft_size = sp_fft.next_fast_len(size, real=True)
    dist = sp_fft.irfft(sp_fft.rfft(pmf, fft_size) ** n, fft_size)[:size]
    cdf = np.cumsum(np.clip(dist, 0.0, None))  # FFT noise can dip a hair below 0
    cdf /= cdf[-1]
    # Antithetic pairs (u, 1 − u): each draw is still exactly distributed, and the resample
    # set of −values is exactly the negated set, so swapping arms mirrors the interval.
    half = rng.random(n_resamples // 2)
    parts = [half, 1.0 - half] + ([np.array([0.5])] if n_resamples % 2 else [])
    sums = np.searchsorted(cdf, np.concatenate(parts), side="right")
    sums = np.minimum(sums, size - 1)
    return (sums + n * low) / (n * unit)


def _alpha(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    return (1.0 - confidence) / 2.0


def percentile_interval(
    resampled: np.ndarray, confidence: float = 0.95
) -> tuple[np.ndarray, np.ndarray]:
    """Equal-tailed percentile interval of bootstrap statistics along axis 0."""
    a = _alpha(confidence)
    low, high = np.quantile(resampled, [a, 1.0 - a], axis=0)
    return low, high


def bca_interval(
    d: np.ndarray, resampled: np.ndarray, confidence: float = 0.95
) -> tuple[float, float]:
    """BCa interval for the mean of `d` from its bootstrap means `resampled`."""
    a = _alpha(confidence)
    n = len(d)
    theta = float(d.mean())
    # z0 as scipy computes it: the share of resamples strictly below the estimate.
    z0 = float(ndtri(np.mean(resampled < theta)))
    # Jackknife means in closed form: θ_(i) = (Σd − d_i)/(n − 1).
    jack = (d.sum() - d) / (n - 1) if n > 1 else np.array([theta])
    u = jack.mean() - jack
    denom = float(np.sum(u**2)) ** 1.5
    accel = float(np.sum(u**3)) / (6.0 * denom) if denom > 0 else 0.0
    if not np.isfinite(z0):
        # every resample on one side of the estimate (degenerate data): fall back
        low, high = percentile_interval(resampled, confidence)
        return float(low), float(high)
    bounds = []
    for z_a in (float(ndtri(a)), float(ndtri(1.0 - a))):
        bounds.append(float(ndtr(z0 + (z0 + z_a) / (1.0 - accel * (z0 + z_a)))))
    low, high = np.quantile(resampled, bounds)
    return float(low), float(high)


def paired_bootstrap_ci(
    pre: ArrayLike,
    post: ArrayLike,
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    seed: int = 0,
    method: str = "percentile",
) -> tuple[float, float]:
    """CI of mean(post − pre) by resampling items (paired). method: percentile | bca."""
    pre_a = np.asarray(pre, dtype=np.float64)
    post_a = np.asarray(post, dtype=np.float64)
    if pre_a.shape != post_a.shape or pre_a.ndim != 1:
        raise ValueError("pre and post must be 1-D and of the same length (one score per item)")
    d = post_a - pre_a
    resampled = bootstrap_means(d, n_resamples, seed)
    if method == "percentile":
        low, high = percentile_interval(resampled, confidence)
        return float(low), float(high)
    if method == "bca":
        return bca_interval(d, resampled, confidence)
    raise ValueError(f"method must be 'percentile' or 'bca', got {method!r}")


def bootstrap_coded_means(
    codes: ArrayLike, table: np.ndarray, n_resamples: int = 10_000, seed: int = 0
) -> np.ndarray:
    """Bootstrap means of `table[codes[i]]` (rows of a small table) over resampled items.

    For per-item vectors that take few distinct values — pass@k for k = 1..n depends only on
    an item's correct count, a pre/post pair only on both counts — each resample only needs
    how often each code was drawn: counts (resamples × codes) @ table / items. Returns
    shape (n_resamples, table columns).
    """
    c = np.asarray(codes, dtype=np.int64)
    t = np.asarray(table, dtype=np.float64)
    if c.ndim != 1 or len(c) == 0 or t.ndim != 2:
        raise ValueError("codes must be non-empty 1-D and table 2-D")
    if c.min() < 0 or c.max() >= t.shape[0]:
        raise ValueError("codes must index rows of table")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    n, width = len(c), t.shape[0]
    rng = np.random.default_rng(seed)
    out = np.empty((n_resamples, t.shape[1]), dtype=np.float64)
    rows_per_chunk = max(1, _GATHER // n)
    for start in range(0, n_resamples, rows_per_chunk):
        rows = min(rows_per_chunk, n_resamples - start)
        drawn = c[rng.integers(0, n, size=(rows, n))]
        drawn += np.arange(rows)[:, None] * width  # one bincount for the whole chunk
        counts = np.bincount(drawn.ravel(), minlength=rows * width).reshape(rows, width)
        out[start : start + rows] = (counts @ t) / n
    return out
