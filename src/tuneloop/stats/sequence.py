"""Error control over a whole sequence of gate decisions: alpha spending and LORD++.

A flywheel gates every round with a one-sided test at level α. Each test alone is sound, but
over 20 rounds in which no challenger is truly better, the chance that at least one is
promoted is about 1 − 0.95^20 = 64%. These functions give round k its own level so that the
whole sequence keeps an error bound. Pure functions; run the checks with
`pytest tests/stats/test_sequence.py`.

Alpha spending (`spending_alpha`, `spent_alpha`): round k is tested at α_k from a series
declared in advance whose sum is at most α. By the union bound, P(any false promotion in the
whole sequence) ≤ Σ α_k ≤ α — the family-wise error rate of every round ever run — whatever
the dependence between rounds, and whatever the other rounds decided. Series:

- `basel`: α_k = α · 6 / (π² k²), Σ = α (Euler's Σ 1/k² = π²/6). Spends 61% of α in round 1
  and decays as 1/k², so late rounds are tested at very small levels (round 20: α / 658).
- `geometric`: α_k = α (1 − r) r^(k−1), 0 < r < 1, Σ = α. Decays faster still.
- `uniform`: α_k = α / H for k ≤ H and 0 beyond — Bonferroni over a declared horizon of H
  rounds; round H + 1 and later cannot promote at all.

`spent_alpha(k)` is Σ_{j ≤ k} α_j in closed form (basel: 1 − 6 ψ₁(k + 1) / π², with ψ₁ the
trigamma function, since Σ_{j > k} 1/j² = ψ₁(k + 1)).

LORD++ (`lord_alpha`, `lord_wealth`; Ramdas, Yang, Wainwright & Jordan 2017, "Online control
of the false discovery rate with decaying memory", NeurIPS, §3, LORD++; after Javanmard &
Montanari 2018, "Online rules for control of false discovery rate and false discovery
exceedance", Annals of Statistics): test t is run at

    α_t = γ_t W0 + (α − W0) γ_{t−τ₁} + α Σ_{j ≥ 2, τ_j < t} γ_{t−τ_j},

where τ₁ < τ₂ < … are the times of earlier rejections (here: promotions), W0 ≤ α the initial
wealth and γ a nonincreasing sequence summing to at most 1 (`lord_gamma`, the default of the
onlineFDR R package). Each rejection earns wealth back, so a flywheel that keeps finding real
improvements keeps testing at useful levels. LORD++ controls the false discovery rate (the
expected fraction of promotions that were not improvements) at α when the p-values of true
nulls are independent of the past. Under the global null — no round truly better — every
promotion is false, so FDR = P(any false promotion), and LORD++ bounds that too.

Why counting only *promotions* as rejections keeps the bound: a promotion needs the test to
pass (p < α_t) AND the gate's other conditions (margin, missing fractions, non-inferiority,
cost), so the promotion event is a subset of the test's rejection event. Under the global
null, until the first promotion α_t = γ_t W0 depends on no earlier outcome, so
P(any false promotion) = P(some round t promotes first) ≤ Σ_t P(p_t < γ_t W0) ≤ W0 Σ γ_t ≤ W0
≤ α, by the union bound alone, whatever the dependence. (With the default W0 = α/2 this is
α/2: LORD++ spends only half its α before its first promotion.) FDR control away from the
global null needs the usual independence of null p-values from the past: each round's gate
slice is drawn fresh.

Deliberately left out: SAFFRON (Ramdas, Zrnic, Wainwright & Jordan 2018, "SAFFRON: an
adaptive algorithm for online control of the false discovery rate", ICML). It adapts to the
fraction of true nulls by only spending wealth on "candidate" p-values below a threshold λ,
which needs a second tuning constant besides α and pays off when many hypotheses are
non-null; a flywheel expects few real improvements over a few dozen rounds, where LORD++ with
alpha spending beside it is the simpler, well-understood choice.

Levels are per round, 1-based throughout (round 1 is the first gate decision of the
sequence).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence

import numpy as np
from scipy.special import polygamma

SPENDING_SERIES = ("basel", "geometric", "uniform")
"""The alpha-spending series `spending_alpha` knows."""

LORD_C = 0.07720838
"""The constant of the default LORD γ sequence (onlineFDR; Javanmard & Montanari 2018)."""


def _check_common(k: int, alpha: float, name: str = "k") -> None:
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"{name} must be an integer ≥ 1 (rounds are 1-based), got {k!r}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")


def _check_series(series: str, ratio: float, horizon: int | None) -> None:
    if series not in SPENDING_SERIES:
        near = difflib.get_close_matches(series, SPENDING_SERIES, n=1)
        hint = f"; did you mean {near[0]!r}" if near else ""
        raise ValueError(f"unknown series {series!r}{hint}; known: {', '.join(SPENDING_SERIES)}")
    if not 0.0 < ratio < 1.0:
        raise ValueError(f"ratio must be in (0, 1), got {ratio!r}")
    if horizon is not None and (
        isinstance(horizon, bool) or not isinstance(horizon, int | np.integer) or horizon < 1
    ):
        raise ValueError(f"horizon must be an integer ≥ 1, got {horizon!r}")
    if series == "uniform" and horizon is None:
        raise ValueError("series 'uniform' needs a horizon (the number of rounds α is split over)")


def spending_alpha(
    k: int, alpha: float, series: str = "basel", *, ratio: float = 0.5, horizon: int | None = None
) -> float:
    """α_k, the level of round k (1-based) of an alpha-spending series summing to at most α.

    `basel`: α·6/(π²k²); `geometric`: α(1 − ratio)·ratio^(k−1); `uniform`: α/horizon for
    k ≤ horizon, 0 beyond. ValueError on k < 1, alpha outside (0, 1), ratio outside (0, 1),
    a horizon < 1 (or none for `uniform`), or an unknown series.
    """
    _check_common(k, alpha)
    _check_series(series, ratio, horizon)
    if series == "basel":
        return alpha * 6.0 / (math.pi**2 * k * k)
    if series == "geometric":
        return alpha * (1.0 - ratio) * ratio ** (k - 1)
    assert horizon is not None
    return alpha / horizon if k <= horizon else 0.0


def spent_alpha(
    k: int, alpha: float, series: str = "basel", *, ratio: float = 0.5, horizon: int | None = None
) -> float:
    """Σ_{j ≤ k} α_j, the part of α the first k rounds spend (closed forms; ≤ α)."""
    _check_common(k, alpha)
    _check_series(series, ratio, horizon)
    if series == "basel":
        # Σ_{j ≤ k} 1/j² = π²/6 − ψ₁(k + 1); the clamp absorbs rounding for large k
        return min(alpha, alpha * (1.0 - 6.0 * float(polygamma(1, k + 1)) / math.pi**2))
    if series == "geometric":
        return alpha * (1.0 - ratio**k)
    assert horizon is not None
    return alpha * min(k, horizon) / horizon


def lord_gamma(j: int) -> float:
    """γ_j = C·log(max(j, 2)) / (j·exp(√log j)), C = 0.07720838 (`LORD_C`), j ≥ 1.

    The default γ of LORD (Javanmard & Montanari 2018) in the onlineFDR R package. It is
    nonincreasing from j = 1: γ_1 = C·log 2 ≈ 0.0535 > γ_2 ≈ 0.0116, and for j ≥ 2 the
    function u·exp(−u − √u) of u = log j decreases once u > 0.61 (log 2 ≈ 0.69). Its sum is
    Σγ ≈ 0.97631 (≤ 1, as LORD++ needs), but it converges very slowly — the tail beyond J is
    ≈ 2C·e^(−√log J)·(L³ + 3L² + 6L + 6) with L = √log J — so the partial sums are only 0.141
    over 20 rounds, 0.300 over 1,000 and 0.522 over 10⁶. Over a short flywheel LORD++ with
    this γ therefore spends little of its α (see `tests/stats/test_sequence.py`).
    """
    if isinstance(j, bool) or not isinstance(j, int | np.integer) or j < 1:
        raise ValueError(f"j must be an integer ≥ 1, got {j!r}")
    return LORD_C * math.log(max(j, 2)) / (j * math.exp(math.sqrt(math.log(j))))


def lord_gammas(n: int) -> np.ndarray:
    """γ_1 … γ_n as an array (vectorised `lord_gamma`; empty for n = 0)."""
    j = np.arange(1, n + 1, dtype=np.float64)
    return LORD_C * np.log(np.maximum(j, 2.0)) / (j * np.exp(np.sqrt(np.log(j))))


def _lord_args(
    t: int, alpha: float, rejections: Sequence[int], w0: float | None
) -> tuple[float, list[int]]:
    _check_common(t, alpha, "t")
    w = alpha / 2 if w0 is None else float(w0)
    if not 0.0 <= w <= alpha:
        raise ValueError(f"w0 must be in [0, alpha] = [0, {alpha:g}], got {w0!r}")
    if any(isinstance(r, bool) or not isinstance(r, int | np.integer) for r in rejections):
        raise ValueError(f"rejections must be integer round numbers, got {list(rejections)!r}")
    times = sorted(int(r) for r in rejections)
    if len(set(times)) != len(times):
        raise ValueError(f"rejections must be distinct rounds, got {list(rejections)!r}")
    if times and not (times[0] >= 1 and times[-1] < t):
        raise ValueError(
            f"rejections must be earlier rounds 1 … {t - 1} (before test {t}), got {times!r}"
        )
    return w, times


def lord_alpha(t: int, alpha: float, rejections: Sequence[int], w0: float | None = None) -> float:
    """LORD++'s level for test t (1-based), given the rounds of earlier rejections (all < t).

    α_t = γ_t·W0 + (α − W0)·γ_{t−τ₁} + α·Σ_{j ≥ 2, τ_j < t} γ_{t−τ_j} (Ramdas et al. 2017);
    `w0` defaults to α/2 and must lie in [0, α]. Rejections may come in any order.
    """
    w, times = _lord_args(t, alpha, rejections, w0)
    level = lord_gamma(t) * w
    if times:
        level += (alpha - w) * lord_gamma(t - times[0])
        level += alpha * sum(lord_gamma(t - tau) for tau in times[1:])
    return level


def lord_wealth(t: int, alpha: float, rejections: Sequence[int], w0: float | None = None) -> float:
    """The wealth before test t: W0 − Σ_{s<t} α_s + (α − W0) for the first rejection before t
    and α for each later one — what a dashboard shows as "remaining". Never negative (Σγ ≤ 1).
    """
    w, times = _lord_args(t, alpha, rejections, w0)
    # Σ_{s<t} α_s in closed form: each term of α_s is a γ that switched on after its
    # rejection, so its sum over s < t is a partial sum Γ(t − 1 − τ) of γ.
    partial = np.concatenate(([0.0], np.cumsum(lord_gammas(t - 1))))
    spent = w * partial[t - 1]
    earned = 0.0
    if times:
        spent += (alpha - w) * partial[t - 1 - times[0]]
        spent += alpha * sum(partial[t - 1 - tau] for tau in times[1:])
        earned = (alpha - w) + alpha * (len(times) - 1)
    return float(w - spent + earned)
