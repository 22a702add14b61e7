"""Population stability index between two histograms (e.g. score or confidence bins).

PSI = Σ_b (a_b − e_b) · ln(a_b / e_b) over bin proportions (Siddiqi 2006, "Credit Risk
Scorecards", ch. 8; Yurdakul 2018 for its distribution). Inputs are counts or proportions
over the same bins; each is normalised to sum to 1, then every proportion is floored at
`eps` so an empty bin gives a large but finite term instead of infinity — the floor is
explicit because the result depends on it. Run `pytest tests/stats/test_drift.py`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def psi(expected: ArrayLike, actual: ArrayLike, eps: float = 1e-6) -> float:
    """Population stability index of `actual` against `expected` (same bins)."""
    e = np.asarray(expected, dtype=np.float64)
    a = np.asarray(actual, dtype=np.float64)
    if e.shape != a.shape or e.ndim != 1 or len(e) == 0:
        raise ValueError("expected and actual must be non-empty 1-D arrays over the same bins")
    if np.any(e < 0) or np.any(a < 0) or e.sum() <= 0 or a.sum() <= 0:
        raise ValueError("histograms must be non-negative with a positive total")
    if eps <= 0:
        raise ValueError(f"eps must be > 0, got {eps}")
    e = np.maximum(e / e.sum(), eps)
    a = np.maximum(a / a.sum(), eps)
    return float(np.sum((a - e) * np.log(a / e)))
