"""Detect data that lie on an integer grid k / L (shared by the exact paths).

Item means of n binary samples are multiples of 1/n and so are their paired differences;
on such a grid sums of resampled or sign-flipped values are integers, which lets the
permutation test and the bootstrap work with exact distributions instead of sampling
every item.
"""

from __future__ import annotations

import numpy as np

MAX_UNIT = 4096
_TOL = 1e-8  # in grid units: far above float noise of k/L, far below a grid step


def lattice_unit(values: np.ndarray) -> int | None:
    """Smallest L ≤ MAX_UNIT with every value·L within 1e-8 of an integer, else None."""
    u = np.unique(np.abs(np.asarray(values, dtype=np.float64)))
    if not np.all(np.isfinite(u)):
        return None
    for start in range(1, MAX_UNIT + 1, 256):
        units = np.arange(start, min(start + 256, MAX_UNIT + 1), dtype=np.float64)
        scaled = units[:, None] * u[None, :]
        ok = np.all(np.abs(scaled - np.rint(scaled)) <= _TOL, axis=1)
        if ok.any():
            return int(units[int(np.argmax(ok))])
    return None
