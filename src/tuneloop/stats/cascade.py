"""Counterfactual composition of a cascade from per-tier predictions already logged.

A cascade asks its tiers in order; tier i keeps the answer when its confidence c_i ≥ t_i
(its hand-off threshold) and hands the request to tier i + 1 otherwise; the last tier always
answers. Given every tier's score s_i, confidence c_i and cost k_i on the same items (each tier
evaluated alone, `eval.logprobs`), the cascade's outcome on item j under thresholds t is

    answering tier  a_j = min{ i : c_ij ≥ t_i }  (the last tier if none)
    score           s_{a_j, j}
    cost            Σ_{i ≤ a_j} k_ij         (every tier asked pays, whether it kept or not)

— exactly what serving it would give when each tier's answer does not depend on having been
asked after another (greedy decoding of the same request), with no new model call. The
candidate thresholds of a hand-off are the distinct confidences of its tier (keeping every
answer at or above each), plus +inf (hand everything off); over them, the accuracy/cost
frontier is the set of settings no other setting beats on both (Pareto). This is the
"cascade by threshold on a confidence signal" of FrugalGPT (Chen, Zaharia, Zou 2023) and the
offline threshold selection of the model-cascade literature, computed exhaustively.

Pure numpy; nothing of ours but this package.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike


@dataclass(frozen=True)
class CascadeOutcome:
    """One setting of the thresholds, composed."""

    thresholds: tuple[float, ...]
    """One per hand-off (tiers − 1)."""
    accuracy: float
    """Mean item score of the cascade."""
    cost: float
    """Mean cost per item."""
    coverage: tuple[float, ...]
    """Fraction of items each tier answered."""


def compose(
    scores: ArrayLike,
    confidences: ArrayLike,
    costs: ArrayLike,
    thresholds: Sequence[float],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(per-item score, per-item cost, answering tier index) of the cascade under
    `thresholds` (module docstring). `confidences` has one array per tier but the last's is
    not read."""
    s, c, k = _arrays(scores, confidences, costs)
    n_tiers, n = s.shape
    if len(thresholds) != n_tiers - 1:
        raise ValueError(f"{n_tiers} tiers take {n_tiers - 1} thresholds, got {len(thresholds)}")
    keeps = np.ones((n_tiers, n), dtype=bool)
    for i, t in enumerate(thresholds):
        keeps[i] = c[i] >= t
    tier = np.argmax(keeps, axis=0)  # the first tier that keeps (the last always does)
    items = np.arange(n)
    paid = np.cumsum(k, axis=0)[tier, items]
    return s[tier, items], paid, tier


def frontier(
    scores: ArrayLike,
    confidences: ArrayLike,
    costs: ArrayLike,
    max_candidates: int = 200,
) -> list[CascadeOutcome]:
    """Every threshold setting over each hand-off's candidates (its tier's distinct
    confidences, thinned to `max_candidates` quantiles when there are more, and +inf),
    composed; the Pareto frontier of (accuracy ↑, cost ↓), cheapest first."""
    s, c, k = _arrays(scores, confidences, costs)
    grids = [_candidates(c[i], max_candidates) for i in range(len(s) - 1)]
    outcomes = [_outcome(s, c, k, t) for t in itertools.product(*grids)]
    return pareto(outcomes)


def pareto(outcomes: Sequence[CascadeOutcome]) -> list[CascadeOutcome]:
    """The outcomes no other beats on both accuracy (higher) and cost (lower), cheapest
    first; among equal (cost, accuracy), the one with the lowest thresholds."""
    ordered = sorted(outcomes, key=lambda o: (o.cost, -o.accuracy, o.thresholds))
    out: list[CascadeOutcome] = []
    best = -np.inf
    for o in ordered:
        if o.accuracy > best:
            out.append(o)
            best = o.accuracy
    return out


def best_under_cost(front: Sequence[CascadeOutcome], budget: float) -> CascadeOutcome | None:
    """The most accurate setting whose mean cost is at most `budget` (None: none is)."""
    within = [o for o in front if o.cost <= budget]
    return max(within, key=lambda o: (o.accuracy, -o.cost)) if within else None


def cheapest_non_inferior(
    front: Sequence[CascadeOutcome], reference: float, epsilon: float = 0.0
) -> CascadeOutcome | None:
    """The cheapest setting whose accuracy is at least `reference − epsilon` (e.g. the best
    single tier's); None when none is."""
    ok = [o for o in front if o.accuracy >= reference - epsilon]
    return min(ok, key=lambda o: (o.cost, -o.accuracy)) if ok else None


def _outcome(s: np.ndarray, c: np.ndarray, k: np.ndarray, t: tuple[float, ...]) -> CascadeOutcome:
    score, paid, tier = compose(s, c, k, t)
    coverage = np.bincount(tier, minlength=len(s)) / len(tier)
    return CascadeOutcome(
        thresholds=tuple(float(x) for x in t),
        accuracy=float(score.mean()),
        cost=float(paid.mean()),
        coverage=tuple(float(x) for x in coverage),
    )


def _candidates(conf: np.ndarray, most: int) -> list[float]:
    values = np.unique(conf)
    if len(values) > most:
        values = np.unique(np.quantile(conf, np.linspace(0, 1, most), method="lower"))
    return [*(float(v) for v in values), float("inf")]


def _arrays(
    scores: ArrayLike, confidences: ArrayLike, costs: ArrayLike
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """tiers × items arrays (scores, confidences, costs), checked."""
    s, c, k = (np.asarray(x, dtype=np.float64) for x in (scores, confidences, costs))
    if s.ndim != 2 or s.shape != c.shape or s.shape != k.shape or len(s) < 2:
        raise ValueError(
            "a cascade needs ≥ 2 tiers with scores, confidences and costs on the same items "
            f"(got shapes {s.shape}, {c.shape}, {k.shape})"
        )
    if np.isnan(c[:-1]).any():
        raise ValueError("a tier that hands off needs a confidence for every item")
    return s, c, k
