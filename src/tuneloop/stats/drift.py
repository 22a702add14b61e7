"""Population stability index between two histograms (score or confidence bins) or samples.

PSI = Σ_b (a_b − e_b) · ln(a_b / e_b) over bin proportions (Siddiqi 2006, "Credit Risk
Scorecards", ch. 8; Yurdakul 2018 for its distribution). Inputs are counts or proportions
over the same bins; each is normalised to sum to 1, then every proportion is floored at
`eps` so an empty bin gives a large but finite term instead of infinity — the floor is
explicit because the result depends on it. Run `pytest tests/stats/test_drift.py`.

`sample_psi` is the same index over two samples of a continuous value (a tier's confidence):
the bins are quantile bins of the reference sample (deciles, as in the credit-scoring use),
so each holds about a tenth of it; ties in the reference merge bins rather than split them.
Bands, as usual: < 0.1 stable, 0.1–0.25 moderate, > 0.25 significant (Siddiqi 2006).
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


def quantile_edges(reference: ArrayLike, bins: int = 10) -> np.ndarray:
    """The interior edges of `bins` quantile bins of `reference`: its own values at the
    quantiles k/bins (numpy's `lower` method — no interpolation, so ±inf, a margin's
    "certain", is a value like any other), repeated edges merged: ties make fewer, wider
    bins. A value v falls in bin i when edges[i-1] < v ≤ edges[i] (`searchsorted`, left)."""
    ref = _sample(reference, "reference")
    if bins < 2:
        raise ValueError(f"bins must be ≥ 2, got {bins}")
    return np.unique(np.quantile(ref, np.arange(1, bins) / bins, method="lower"))


def sample_psi(reference: ArrayLike, actual: ArrayLike, bins: int = 10, eps: float = 1e-6) -> float:
    """PSI of two samples of a continuous value, over `bins` quantile bins of `reference`
    (deciles by default, the credit-scoring convention): each sample is counted into the
    bins of `quantile_edges(reference)`, then `psi` as above."""
    ref, act = _sample(reference, "reference"), _sample(actual, "actual")
    edges = quantile_edges(ref, bins)
    size = len(edges) + 1
    expected = np.bincount(np.searchsorted(edges, ref, side="left"), minlength=size)
    observed = np.bincount(np.searchsorted(edges, act, side="left"), minlength=size)
    return psi(expected, observed, eps)


def _sample(values: ArrayLike, name: str) -> np.ndarray:
    out = np.asarray(values, dtype=np.float64)
    if out.ndim != 1 or len(out) == 0 or np.any(np.isnan(out)):
        raise ValueError(f"{name} must be a non-empty 1-D array without NaN")
    return out
