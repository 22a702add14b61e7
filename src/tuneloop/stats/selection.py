"""Choosing one arm among several evaluated on the same items, by a rule fixed in advance.

Pure functions over per-item scores (one 1-D array per arm, the items in one common order).
Run the checks with `pytest tests/stats/test_selection.py`.

- `paired_figures(candidate, default)`: the mean paired advantage (mean over items of
  candidate − default), wins (items where the candidate scores higher), losses, ties, and the
  exact two-sided sign test on wins and losses with ties dropped — the exact binomial test
  with p = 1/2 on the discordant items (Dixon & Mood 1946), `paired.sign_test`, which equals
  `scipy.stats.binomtest(wins, wins + losses, 0.5).pvalue`; p = 1 when no item is discordant.
- `tag_means`, `tag_differences`: mean item score per tag (an item counts under each of its
  tags; an item without tags under `UNTAGGED`, ""), and per tag whether a candidate is
  non-inferior to the default: its mean there ≥ the default's − ε.
- `default_stays(scores, tags, default, sign_p=, epsilon=)`: the default arm is chosen unless
  another arm (a) is non-inferior on every tag, (b) has a positive mean paired advantage and
  (c) has sign-test p ≤ `sign_p`. Among several arms that beat the default: the highest
  mean, then the lower cost, then the name.
- `best_mean(scores)`: the highest mean; exact ties go to the lower cost (an unknown cost,
  None, sorts last), then the name.
- `holm_choice(p_values, passes, alpha)`: several arms adjudicated together against one
  champion, family-wise error controlled by Holm's step-down procedure (Holm 1979, "A simple
  sequentially rejective multiple test procedure"): with the k one-sided p-values sorted
  ascending, p_(i) is compared with α / (k − i + 1), stepping down until the first failure;
  the arms before it are rejected (they pass the test). A rejection is strict, p_(i) < the
  threshold, as the gate's single test is p < α (with k = 1 the two agree), so an arm is
  rejected exactly when its Holm-adjusted p (`multiplicity.holm_adjust`) is < α. Among the
  rejected arms whose other conditions pass (margin, non-inferiority, minimum items — one
  bool per arm, decided by the caller), the cheapest is chosen (ties: the smaller p, then the
  name); none is chosen when none passes.

Every result is a small frozen dataclass with the figures it was decided on and its reason in
words (which conditions held and which failed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from tuneloop.stats.multiplicity import holm_adjust
from tuneloop.stats.paired import sign_test

UNTAGGED = ""
"""The tag an item without tags counts under."""


@dataclass(frozen=True)
class PairedFigures:
    """A candidate arm against the default, paired by item."""

    n_items: int
    mean_candidate: float
    mean_default: float
    advantage: float
    """Mean over items of candidate − default."""
    wins: int
    """Items where the candidate scores higher."""
    losses: int
    """Items where the default scores higher."""
    ties: int
    """Items with equal scores (dropped by the sign test)."""
    sign_p: float
    """Exact two-sided sign test on wins and losses; 1.0 when there are none."""


@dataclass(frozen=True)
class TagDifference:
    """A candidate against the default on one tag's items."""

    tag: str
    n_items: int
    mean_candidate: float
    mean_default: float
    difference: float
    """mean_candidate − mean_default."""
    non_inferior: bool
    """difference ≥ −ε."""


@dataclass(frozen=True)
class CandidateTest:
    """One arm against the default under `default_stays`' three conditions."""

    candidate: str
    default: str
    paired: PairedFigures
    tags: tuple[TagDifference, ...]
    """Every tag, sorted by name."""
    sign_p_threshold: float
    epsilon: float

    @property
    def non_inferior(self) -> bool:
        """(a) Non-inferior on every tag."""
        return all(t.non_inferior for t in self.tags)

    @property
    def positive(self) -> bool:
        """(b) A positive mean paired advantage."""
        return self.paired.advantage > 0

    @property
    def significant(self) -> bool:
        """(c) Sign-test p at most the threshold."""
        return self.paired.sign_p <= self.sign_p_threshold

    @property
    def beats_default(self) -> bool:
        """All three conditions hold."""
        return self.non_inferior and self.positive and self.significant

    def describe(self) -> str:
        """The conditions in words: what held, and what failed."""
        adv = f"{self.candidate!r} advantage {self.paired.advantage:+.3f}"
        p = f"sign-test p {self.paired.sign_p:.3g}"
        failed = []
        if not self.positive:
            failed.append("not positive")
        if not self.significant:
            failed.append(f"{p} > {self.sign_p_threshold:g}")
        failed += [
            f"inferior on tag {_tag_name(t.tag)} ({t.difference:+.3f} < -{self.epsilon:g})"
            for t in self.tags
            if not t.non_inferior
        ]
        if not failed:
            return (
                f"{adv}, {p} ≤ {self.sign_p_threshold:g}, non-inferior on every tag "
                f"(ε {self.epsilon:g})"
            )
        if not self.positive:
            return f"{adv} is " + ", ".join(failed)
        return f"{adv} but " + ", ".join(failed)


@dataclass(frozen=True)
class SelectionResult:
    """The arm a rule chose, and why."""

    rule: Literal["default_stays", "best_mean"]
    chosen: str
    default: str | None
    """The default arm (`default_stays`); None for `best_mean`."""
    means: dict[str, float]
    """Every arm's mean item score."""
    tests: tuple[CandidateTest, ...]
    """`default_stays`: every other arm against the default, in the given order; empty for
    `best_mean`."""
    reason: str


@dataclass(frozen=True)
class HolmArm:
    """One arm of a Holm step-down."""

    name: str
    p: float
    """Its one-sided p-value against the champion."""
    rank: int
    """1-based position among the p-values sorted ascending (ties by name)."""
    threshold: float
    """α / (k − rank + 1)."""
    p_adjusted: float
    """Holm-adjusted p (`holm_adjust`)."""
    rejected: bool
    """Passed the step-down: this and every smaller p is below its threshold."""
    passes: bool
    """The bar's other conditions hold (as given)."""
    cost: float | None


@dataclass(frozen=True)
class HolmChoice:
    alpha: float
    arms: tuple[HolmArm, ...]
    """In rank order."""
    chosen: str | None
    """The cheapest rejected arm whose other conditions pass; None when there is none."""
    reason: str


def _vector(scores: ArrayLike, what: str) -> np.ndarray:
    a = np.asarray(scores, dtype=np.float64)
    if a.ndim != 1 or len(a) == 0:
        raise ValueError(f"{what}: expected a non-empty 1-D array of item scores")
    return a


def _tag_name(tag: str) -> str:
    return repr(tag) if tag != UNTAGGED else "(untagged)"


def paired_figures(candidate: ArrayLike, default: ArrayLike) -> PairedFigures:
    """Advantage, wins/losses/ties and the exact two-sided sign test of candidate vs default."""
    c, d = _vector(candidate, "candidate"), _vector(default, "default")
    if c.shape != d.shape:
        raise ValueError(f"candidate and default differ in length: {len(c)} vs {len(d)}")
    wins, losses = int(np.sum(c > d)), int(np.sum(c < d))
    return PairedFigures(
        n_items=len(c),
        mean_candidate=float(c.mean()),
        mean_default=float(d.mean()),
        advantage=float((c - d).mean()),
        wins=wins,
        losses=losses,
        ties=len(c) - wins - losses,
        sign_p=sign_test(wins, losses, "two-sided"),
    )


def _tag_index(tags: Sequence[Sequence[str]], n: int) -> dict[str, np.ndarray]:
    if len(tags) != n:
        raise ValueError(f"tags: {len(tags)} entries for {n} items")
    members: dict[str, list[int]] = {}
    for i, item_tags in enumerate(tags):
        for tag in sorted(set(item_tags)) or [UNTAGGED]:
            members.setdefault(tag, []).append(i)
    return {tag: np.asarray(members[tag]) for tag in sorted(members)}


def tag_means(scores: ArrayLike, tags: Sequence[Sequence[str]]) -> dict[str, float]:
    """Mean item score per tag, sorted by tag; an item without tags counts under `UNTAGGED`."""
    a = _vector(scores, "scores")
    return {tag: float(a[idx].mean()) for tag, idx in _tag_index(tags, len(a)).items()}


def tag_differences(
    candidate: ArrayLike, default: ArrayLike, tags: Sequence[Sequence[str]], epsilon: float
) -> tuple[TagDifference, ...]:
    """Per tag (sorted): both means, their difference, and non-inferiority (≥ −ε)."""
    c, d = _vector(candidate, "candidate"), _vector(default, "default")
    if c.shape != d.shape:
        raise ValueError(f"candidate and default differ in length: {len(c)} vs {len(d)}")
    if epsilon < 0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon}")
    out = []
    for tag, idx in _tag_index(tags, len(c)).items():
        mc, md = float(c[idx].mean()), float(d[idx].mean())
        out.append(TagDifference(tag, len(idx), mc, md, mc - md, mc - md >= -epsilon))
    return tuple(out)


def against_default(
    name: str,
    candidate: ArrayLike,
    default_name: str,
    default: ArrayLike,
    tags: Sequence[Sequence[str]],
    *,
    sign_p: float,
    epsilon: float,
) -> CandidateTest:
    """One arm against the default under `default_stays`' conditions."""
    if not 0 < sign_p < 1:
        raise ValueError(f"sign_p must be in (0, 1), got {sign_p}")
    return CandidateTest(
        candidate=name,
        default=default_name,
        paired=paired_figures(candidate, default),
        tags=tag_differences(candidate, default, tags, epsilon),
        sign_p_threshold=sign_p,
        epsilon=epsilon,
    )


def _cost_key(cost: float | None) -> tuple[bool, float]:
    """Sort key of a cost: known costs ascending, an unknown one (None) last."""
    return (cost is None, 0.0 if cost is None else float(cost))


def _means(scores: Mapping[str, ArrayLike]) -> dict[str, float]:
    if not scores:
        raise ValueError("no arms to choose from")
    vectors = {name: _vector(s, repr(name)) for name, s in scores.items()}
    lengths = {len(v) for v in vectors.values()}
    if len(lengths) != 1:
        raise ValueError(f"arms differ in their number of items: {sorted(lengths)}")
    return {name: float(v.mean()) for name, v in vectors.items()}


def _cost(costs: Mapping[str, float | None] | None, name: str) -> float | None:
    return None if costs is None else costs.get(name)


def _cost_words(cost: float | None) -> str:
    return "unknown" if cost is None else f"{cost:g}"


def default_stays(
    scores: Mapping[str, ArrayLike],
    tags: Sequence[Sequence[str]],
    default: str,
    *,
    sign_p: float,
    epsilon: float,
    costs: Mapping[str, float | None] | None = None,
) -> SelectionResult:
    """The default arm, unless another beats it on all three conditions (module docstring)."""
    means = _means(scores)
    if default not in scores:
        raise ValueError(f"default {default!r} is not among the arms {sorted(scores)}")
    tests = tuple(
        against_default(name, s, default, scores[default], tags, sign_p=sign_p, epsilon=epsilon)
        for name, s in scores.items()
        if name != default
    )
    winners = sorted(
        (t for t in tests if t.beats_default),
        key=lambda t: (-means[t.candidate], _cost_key(_cost(costs, t.candidate)), t.candidate),
    )
    if not winners:
        why = "; ".join(t.describe() for t in tests)
        return SelectionResult(
            "default_stays", default, default, means, tests, f"default {default!r} stays: {why}"
        )
    best = winners[0]
    reason = f"{best.candidate!r} replaces default {default!r}: {best.describe()}"
    if len(winners) > 1:
        others = ", ".join(repr(t.candidate) for t in winners[1:])
        reason += (
            f"; {len(winners)} arms beat the default ({others} too), chosen by the highest "
            f"mean ({means[best.candidate]:.4f}), then the lower cost, then the name"
        )
    return SelectionResult("default_stays", best.candidate, default, means, tests, reason)


def best_mean(
    scores: Mapping[str, ArrayLike], costs: Mapping[str, float | None] | None = None
) -> SelectionResult:
    """The arm with the highest mean; exact ties to the lower cost (None last), then the name."""
    means = _means(scores)
    order = sorted(means, key=lambda n: (-means[n], _cost_key(_cost(costs, n)), n))
    chosen = order[0]
    top = [n for n in order if means[n] == means[chosen]]
    reason = f"{chosen!r} has the highest mean ({means[chosen]:.4f})"
    if len(top) > 1:
        costs_ = ", ".join(f"{n!r} {_cost_words(_cost(costs, n))}" for n in top)
        reason += f", tied with {len(top) - 1} other arm(s); by cost ({costs_}), then name"
    runner_up = next((n for n in order if means[n] < means[chosen]), None)
    if runner_up is not None:
        reason += f"; next {runner_up!r} at {means[runner_up]:.4f}"
    return SelectionResult("best_mean", chosen, None, means, (), reason)


def holm_choice(
    p_values: Mapping[str, float],
    passes: Mapping[str, bool],
    alpha: float,
    costs: Mapping[str, float | None] | None = None,
) -> HolmChoice:
    """Holm's step-down over the arms' one-sided p-values; the cheapest passing arm."""
    if set(passes) != set(p_values):
        raise ValueError(f"passes names {sorted(passes)} but p_values names {sorted(p_values)}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    order = sorted(p_values, key=lambda n: (p_values[n], n))
    k = len(order)
    adjusted = holm_adjust([p_values[n] for n in order])
    arms = []
    stepping = True
    for i, name in enumerate(order, start=1):
        threshold = alpha / (k - i + 1)
        stepping = stepping and p_values[name] < threshold
        arms.append(
            HolmArm(
                name=name,
                p=float(p_values[name]),
                rank=i,
                threshold=threshold,
                p_adjusted=adjusted[i - 1],
                rejected=stepping,
                passes=bool(passes[name]),
                cost=_cost(costs, name),
            )
        )
    eligible = sorted(
        (a for a in arms if a.rejected and a.passes),
        key=lambda a: (_cost_key(a.cost), a.p, a.name),
    )
    rejected = [a for a in arms if a.rejected]
    if eligible:
        best = eligible[0]
        reason = (
            f"{best.name!r} chosen: p {best.p:.3g} < Holm threshold {best.threshold:.3g} "
            f"(adjusted p {best.p_adjusted:.3g} < α {alpha:g}, {k} arm(s)) and the bar's other "
            f"conditions hold"
        )
        if len(eligible) > 1:
            reason += f"; the cheapest of {len(eligible)} such arms (cost {_cost_words(best.cost)})"
        return HolmChoice(alpha, tuple(arms), best.name, reason)
    if not arms:
        return HolmChoice(alpha, (), None, "no arm to adjudicate")
    first_kept = next((a for a in arms if not a.rejected), None)
    parts = []
    if rejected:
        names = ", ".join(repr(a.name) for a in rejected)
        parts.append(f"{names} pass Holm's step-down but fail the bar's other conditions")
    if first_kept is not None:
        parts.append(
            f"the step-down stops at {first_kept.name!r}: p {first_kept.p:.3g} ≥ threshold "
            f"{first_kept.threshold:.3g} (α {alpha:g} / {k - first_kept.rank + 1})"
        )
    return HolmChoice(alpha, tuple(arms), None, "no arm chosen: " + "; ".join(parts))
