"""Unbiased pass@k (Chen et al. 2021, "Evaluating Large Language Models Trained on Code").

With n samples of which c are correct, pass@k = 1 − C(n−c, k) / C(n, k). The binomials
overflow for realistic n, so, as in the paper's reference code, it is computed as the
stable product 1 − Π_{i=n−c+1}^{n} (1 − k / i). Run the checks with
`pytest tests/stats/test_passk.py`.

A sample counts as correct when its score is ≥ 0.5 (the report's convention, applied by the
caller); this module only sees the counts.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one item: n samples, c correct, 1 ≤ k ≤ n.

    c = 0 gives 0; n − c < k gives 1 (every k-subset holds a correct sample).
    """
    if not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 1 <= k <= n, got k={k}, n={n}")
    if not 0 <= c <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n, got c={c}, n={n}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1, dtype=np.float64)))


def pass_at_k_matrix(n: int, correct: ArrayLike, ks: Sequence[int]) -> np.ndarray:
    """Per-item pass@k: an (items × len(ks)) float64 array for items with `correct` counts.

    Computed once per distinct count, so the cost is O(n · len(ks)) whatever the item count.
    """
    counts = np.asarray(correct, dtype=np.int64)
    out = np.empty((len(counts), len(ks)), dtype=np.float64)
    for c in np.unique(counts):
        row = [pass_at_k(n, int(c), int(k)) for k in ks]
        out[counts == c] = row
    return out


def pass_at_k_curve(n: int, correct: ArrayLike, ks: Sequence[int] | None = None) -> list[float]:
    """Mean pass@k over items for each k (default k = 1..n)."""
    ks = list(range(1, n + 1)) if ks is None else list(ks)
    if np.size(correct) == 0:
        raise ValueError("pass_at_k_curve needs at least one item")
    return [float(v) for v in pass_at_k_matrix(n, correct, ks).mean(axis=0)]
