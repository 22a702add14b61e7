"""Holm's step-down adjustment against the published formula (Holm 1979)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tuneloop.stats import holm_adjust


def test_exact_vector() -> None:
    # sorted 0.005, 0.01, 0.03, 0.04 → ×4, ×3, ×2, ×1 → 0.02, 0.03, 0.06, max(0.06, 0.04)
    assert holm_adjust([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm_adjust([0.5, 0.9]) == [1.0, 1.0]
    assert holm_adjust([]) == []
    with pytest.raises(ValueError):
        holm_adjust([1.5])


@given(st.lists(st.floats(0, 1), min_size=1, max_size=30), st.floats(0.001, 0.5))
def test_properties(p: list[float], alpha: float) -> None:
    adj = holm_adjust(p)
    m = len(p)
    assert all(raw <= a <= 1.0 for raw, a in zip(p, adj, strict=True))
    assert all(
        a <= min(1.0, m * raw) + 1e-12 for raw, a in zip(p, adj, strict=True)
    )  # ≤ Bonferroni
    ranked = sorted(range(m), key=lambda i: p[i])
    assert all(adj[ranked[k]] <= adj[ranked[k + 1]] for k in range(m - 1))  # monotone
    # the same rejections as the step-down procedure itself
    rejected, k = set(), 0
    while k < m and p[ranked[k]] * (m - k) < alpha:
        rejected.add(ranked[k])
        k += 1
    assert {i for i in range(m) if adj[i] < alpha} == rejected
