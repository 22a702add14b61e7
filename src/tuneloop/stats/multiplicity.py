"""Family-wise error control for several tests decided together (Holm 1979).

`holm_adjust(p)` returns Holm's step-down adjusted p-values, in the input order: with the
p-values sorted ascending, p̃_(i) = max_{j ≤ i} min(1, (m − j + 1) · p_(j)). Rejecting every
hypothesis whose adjusted p-value is < alpha controls the family-wise error rate at alpha
under any dependence between the tests (Holm 1979, "A simple sequentially rejective multiple
test procedure"); it is uniformly more powerful than Bonferroni. Ties keep their input order.
"""

from __future__ import annotations

from collections.abc import Sequence


def holm_adjust(p_values: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values, same order as given."""
    m = len(p_values)
    for p in p_values:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"p-values must be in [0, 1], got {p}")
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted
