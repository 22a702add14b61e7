"""Isotonic calibration of a confidence signal: P(correct | signal), monotone, fit on
validation items only.

A cascade tier's raw signal (a mean token log-probability, a top-two margin) is monotone in
how often the tier is right, but not a probability. The isotonic map is the non-decreasing
step function that fits the items' correctness best in squared error — the pool-adjacent-
violators solution (Ayer, Brunk, Ewing, Reid and Silverman 1955; as a calibrator, Zadrozny and
Elkan 2002) — computed by `scipy.optimize.isotonic_regression` on the items sorted by their
signal, ties pooled first (their mean), so that the map is a function of the signal alone.
Between fitted points it interpolates linearly, and beyond them it holds the end values (as
scikit-learn's `IsotonicRegression(out_of_bounds="clip")`, the reference in the tests).

Fit it on the validation part; thresholds chosen on the calibrated value are then in
probability units, comparable across tiers and signals.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import isotonic_regression


@dataclass(frozen=True)
class IsotonicMap:
    """A fitted map: the distinct signal values seen and the calibrated value at each."""

    x: tuple[float, ...]
    y: tuple[float, ...]

    def __call__(self, signal: ArrayLike) -> np.ndarray:
        """Calibrated values of `signal` (linear between fitted points, held beyond them)."""
        return np.interp(np.asarray(signal, dtype=np.float64), self.x, self.y)


def fit_isotonic(signal: ArrayLike, correct: ArrayLike) -> IsotonicMap:
    """The non-decreasing map from `signal` to P(correct) (module docstring); `correct` may be
    0/1 or an item's mean score in [0, 1]."""
    s = np.asarray(signal, dtype=np.float64)
    c = np.asarray(correct, dtype=np.float64)
    if s.ndim != 1 or s.shape != c.shape or len(s) == 0:
        raise ValueError("signal and correct must be non-empty 1-D arrays of one length")
    if not np.isfinite(s).all() or not ((c >= 0) & (c <= 1)).all():
        raise ValueError("signal must be finite and correct in [0, 1]")
    x, inverse, counts = np.unique(s, return_inverse=True, return_counts=True)
    means = np.bincount(inverse, weights=c) / counts  # ties pooled: a function of the signal
    fitted = isotonic_regression(means, weights=counts, increasing=True).x
    return IsotonicMap(tuple(float(v) for v in x), tuple(float(v) for v in fitted))
