"""The promotion decision rule: a pure function from paired item scores and a bar to a decision.

The rule (copied into docs/gate.md and the README)
--------------------------------------------------
Let the gate slice have n items. For item i, a_i is the champion's and b_i the challenger's
item score on the bar's metric — `mean`: the mean of the item's sample scores (the pass@1
estimate); `pass_at_k`: the unbiased pass@k estimate from the item's n samples, of which c
scored 1 (Chen et al. 2021). Unscored samples (missing, harness error) count as 0 in both
arms. Let d_i = b_i - a_i and Δ = mean_i d_i. The challenger is **promoted iff every one of
these conditions holds**; each failed condition is a reason, and the verdict lists every
condition with the numbers behind it:

1. `min_items`: n ≥ min_items.
2. `missing_champion`, `missing_challenger`: in each arm, the fraction of the slice's
   (item, sample) keys without a scored completion is ≤ max_missing_fraction.
3. `significance`: the one-sided paired test of H0 "the challenger is no better" against
   H1 "challenger > champion" gives p < alpha (under a sequence rule, `gate.sequence`, the
   bar's alpha is the round's α_k: `tuneloop.gate.sequence`). `permutation`: the paired sign-flip
   permutation test on the d_i (Fisher 1935; exact when feasible, Monte Carlo otherwise);
   `sign`: the exact sign test on item wins (d_i > 0) against losses (d_i < 0), ties dropped
   (for one binary sample per item it equals the exact McNemar test).
4. `margin`: the point estimate Δ ≥ margin.
5. `non_inferiority:<tag>` (only when non_inferiority_epsilon ε is set), for every tag on the
   slice: H0 "the tag's mean d_i ≤ -ε" is rejected. Each tag's one-sided p-value is the
   paired bootstrap's (Koehn 2004): p_t = (1 + #{resampled means ≤ -ε}) / (1 + B); the m
   tags' p-values are adjusted together by Holm's step-down procedure (Holm 1979), and a tag
   passes when its adjusted p-value is < alpha. So the chance that ANY tag is wrongly declared
   non-inferior is ≤ alpha (family-wise), not alpha per tag. The verdict lists, per tag, Δ,
   the raw and Holm-adjusted p-values and the informational one-sided (1 - alpha) lower bound
   (the lower end of the (1 - 2·alpha) percentile interval). A tag with fewer than 2 items
   cannot be bounded and fails (fail closed).
6. `cost:max_usd_per_item`, `cost:max_ratio_to_champion` (only when the bar sets `cost`):
   the challenger's mean cost per item is within the limit — a measured figure, not a test;
   `tuneloop.gate.cost` states it and adds these to the decision (`Decision.extended`).

Why the margin is judged on the point estimate and not on the lower bound (a deliberate
choice): the false-promotion guarantee that matters — a challenger that is truly no better
is promoted with probability ≤ alpha — comes from condition 3 alone. Requiring the lower
bound to clear the margin as well would test H0 "Δ ≤ margin", which needs on the order of
(z_α + z_β)² σ² / (Δ - margin)² items and is out of reach of a held-back gate slice for any
useful margin; the margin's job here is practical: never ship a change that is significant
but too small to matter. The cost, stated plainly: a challenger whose true Δ equals the
margin passes condition 4 about half the time. The one-sided lower bound on Δ is computed
and reported in every verdict so a reader can see how far the evidence goes.

Requiring every tag to pass is an intersection-union test (Berger 1982), which on its own
would keep the false-promotion rate ≤ alpha without any correction. Holm is applied anyway,
deliberately: each tag's "non-inferior" line is a claim a reader acts on (ship for that user
group), and with many tags those claims would otherwise be wrong for some tag far more often
than alpha. The cost: with m tags, promotion needs the smallest tag p-value below alpha/m.

The caller turns `promote` into `awaiting_approval` when approval is required; this module
does no I/O and knows nothing of files, ledgers or configs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tuneloop import stats
from tuneloop.gate.bar import Bar

MIN_TAG_ITEMS = 2
"""Fewest items a tag needs before its Δ can be bounded at all."""


@dataclass(frozen=True)
class Condition:
    """One condition of the rule, with the numbers it was judged on."""

    name: str
    """`min_items`, `missing_champion`, `missing_challenger`, `significance`, `margin`,
    `non_inferiority:<tag>`, or `cost:<limit>`."""
    passed: bool
    """Whether the condition holds."""
    detail: str
    """One sentence a person can read: the numbers and the threshold."""
    values: dict[str, Any] = field(default_factory=dict)
    """The numbers behind the detail, for machines."""


@dataclass(frozen=True)
class Decision:
    """The rule's output: promote or not, every condition, and summary statistics."""

    promote: bool
    """True iff every condition passed."""
    conditions: tuple[Condition, ...]
    """Every condition, passed or not, in the order of the rule."""
    stats: dict[str, Any]
    """n_items, means, delta, p_value, lower bound, wins/losses/ties."""

    @property
    def reasons(self) -> list[str]:
        """The details of the failed conditions (empty when promoted)."""
        return [c.detail for c in self.conditions if not c.passed]

    def extended(self, more: Sequence[Condition]) -> Decision:
        """This decision with further conditions after the rule's: promote iff all hold."""
        conditions = (*self.conditions, *more)
        return Decision(all(c.passed for c in conditions), conditions, self.stats)


def item_scores(samples: np.ndarray, metric: str, k: int = 1) -> np.ndarray:
    """Per-item metric from an (items × samples) array of sample scores (unscored = 0).

    `pass_at_k` counts a sample as correct when its score is 1 (full credit) and uses the
    unbiased estimator of Chen et al. 2021.
    """
    samples = np.asarray(samples, dtype=float)
    if samples.ndim != 2:
        raise ValueError(f"expected an (items × samples) array, got shape {samples.shape}")
    if metric == "mean":
        return samples.mean(axis=1) if samples.shape[1] else np.zeros(samples.shape[0])
    if metric == "pass_at_k":
        n = samples.shape[1]
        if k > n:
            raise ValueError(f"pass@{k} needs at least {k} samples per item (have {n})")
        correct = (samples >= 1.0 - 1e-12).sum(axis=1)
        return np.array([stats.pass_at_k(n, int(c), k) for c in correct], dtype=float)
    raise ValueError(f"unknown metric {metric!r}")


def decide(
    champion: Sequence[float] | np.ndarray,
    challenger: Sequence[float] | np.ndarray,
    *,
    bar: Bar,
    tags: Sequence[Sequence[str]] | None = None,
    missing: tuple[float, float] = (0.0, 0.0),
    seed: int = 0,
    n_resamples: int = 10_000,
    bound: bool = True,
) -> Decision:
    """Apply the rule to paired item scores (same items, same order) and return the decision.

    `missing` is the unscored fraction of (champion, challenger) samples; `tags` the items'
    tags (needed for non-inferiority). `bound=False` skips the informational bootstrap bound
    on Δ (the decision does not depend on it; the benchmark skips it for speed).
    """
    a = np.asarray(champion, dtype=float)
    b = np.asarray(challenger, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired arrays must have equal 1-d shapes ({a.shape} vs {b.shape})")
    d = b - a
    n = int(d.size)
    p = _p_value(d, bar.test, seed, n_resamples) if n else 1.0
    delta = float(d.mean()) if n else 0.0
    summary: dict[str, Any] = {
        "n_items": n,
        "champion_mean": float(a.mean()) if n else None,
        "challenger_mean": float(b.mean()) if n else None,
        "delta": delta,
        "p_value": p,
        "wins": int((d > 0).sum()),
        "losses": int((d < 0).sum()),
        "ties": int((d == 0).sum()),
        "delta_lower_bound": None,
        "bound_confidence": 1 - bar.alpha,
    }
    if bound and n >= MIN_TAG_ITEMS:
        summary["delta_lower_bound"] = _lower_bound(a, b, bar.alpha, seed, n_resamples)
    conditions = [
        _min_items(n, bar),
        _missing("champion", missing[0], bar),
        _missing("challenger", missing[1], bar),
        _significance(p, bar),
        _margin(delta, bar),
    ]
    if bar.non_inferiority_epsilon is not None:
        conditions += _non_inferiority(a, b, tags, bar, seed, n_resamples)
    return Decision(all(c.passed for c in conditions), tuple(conditions), summary)


def _p_value(d: np.ndarray, test: str, seed: int, n_resamples: int) -> float:
    if test == "sign":
        return float(stats.sign_test(int((d > 0).sum()), int((d < 0).sum()), alternative="greater"))
    return float(
        stats.paired_permutation_test(
            d.tolist(), alternative="greater", n_resamples=n_resamples, seed=seed
        )
    )


def _lower_bound(a: np.ndarray, b: np.ndarray, alpha: float, seed: int, n_resamples: int) -> float:
    # The one-sided (1 - alpha) lower bound is the lower end of the (1 - 2 alpha) interval.
    low, _ = stats.paired_bootstrap_ci(
        a.tolist(), b.tolist(), confidence=1 - 2 * alpha, n_resamples=n_resamples, seed=seed
    )
    return float(low)


def _min_items(n: int, bar: Bar) -> Condition:
    ok = n >= bar.min_items
    return Condition(
        "min_items",
        ok,
        f"{n} items on the slice ({'≥' if ok else '<'} min_items {bar.min_items})",
        {"n_items": n, "min_items": bar.min_items},
    )


def _missing(arm: str, fraction: float, bar: Bar) -> Condition:
    ok = fraction <= bar.max_missing_fraction
    return Condition(
        f"missing_{arm}",
        ok,
        f"{arm}: {fraction:.2%} of samples unscored "
        f"({'≤' if ok else '>'} max_missing_fraction {bar.max_missing_fraction:.2%})",
        {"missing_fraction": fraction, "max_missing_fraction": bar.max_missing_fraction},
    )


def _significance(p: float, bar: Bar) -> Condition:
    ok = p < bar.alpha
    values: dict[str, Any] = {"p_value": p, "alpha": bar.alpha, "test": bar.test}
    level = f"alpha {bar.alpha:g}"
    if bar.sequence is not None:  # the round's share of the flywheel's α (gate.sequence)
        k = bar.sequence.k
        level = f"α_{k} = {bar.alpha:.3g}: round {k} of the sequence, {bar.sequence.describe()}"
        values["sequence_k"] = k
    return Condition(
        "significance",
        ok,
        f"one-sided {bar.test} test p = {p:.4g} ({'<' if ok else '≥'} {level})",
        values,
    )


def _margin(delta: float, bar: Bar) -> Condition:
    ok = delta >= bar.margin
    return Condition(
        "margin",
        ok,
        f"Δ = {delta:+.4f} ({'≥' if ok else '<'} margin {bar.margin:g})",
        {"delta": delta, "margin": bar.margin},
    )


def _non_inferiority(
    a: np.ndarray,
    b: np.ndarray,
    tags: Sequence[Sequence[str]] | None,
    bar: Bar,
    seed: int,
    n_resamples: int,
) -> list[Condition]:
    eps = float(bar.non_inferiority_epsilon or 0.0)
    if tags is None or len(tags) != a.size:
        return [
            Condition("non_inferiority", False, "non-inferiority is set but items carry no tags")
        ]
    by_tag: dict[str, list[int]] = {}
    for i, item_tags in enumerate(tags):
        for tag in item_tags:
            by_tag.setdefault(tag, []).append(i)
    tested = {t: np.array(ix) for t, ix in sorted(by_tag.items()) if len(ix) >= MIN_TAG_ITEMS}
    raw = {t: _ni_p_value(b[ix] - a[ix], eps, seed, n_resamples) for t, ix in tested.items()}
    holm = dict(zip(raw, stats.holm_adjust(list(raw.values())), strict=True))
    out = []
    for tag in sorted(by_tag):
        idx = np.array(by_tag[tag])
        delta = float((b[idx] - a[idx]).mean())
        values: dict[str, Any] = {"n_items": int(idx.size), "delta": delta, "epsilon": eps}
        if tag not in tested:
            detail = f"tag {tag!r}: {idx.size} item — too few to bound its Δ (need {MIN_TAG_ITEMS})"
            out.append(Condition(f"non_inferiority:{tag}", False, detail, values))
            continue
        low = _lower_bound(a[idx], b[idx], bar.alpha, seed, n_resamples)
        ok = holm[tag] < bar.alpha
        values |= {
            "lower_bound": low,
            "p_value": raw[tag],
            "p_holm": holm[tag],
            "n_tags": len(tested),
            "correction": "holm",
        }
        detail = (
            f"tag {tag!r} ({idx.size} items): Δ = {delta:+.4f}, H0 Δ ≤ -ε = {-eps:g}: "
            f"p = {raw[tag]:.4g}, Holm-adjusted over {len(tested)} tags p = {holm[tag]:.4g} "
            f"({'<' if ok else '≥'} alpha {bar.alpha:g}); {1 - bar.alpha:.0%} lower bound "
            f"{low:+.4f}"
        )
        out.append(Condition(f"non_inferiority:{tag}", ok, detail, values))
    return out


def _ni_p_value(d: np.ndarray, eps: float, seed: int, n_resamples: int) -> float:
    """One-sided bootstrap p-value of H0 "mean d ≤ -eps" (resampled items; +1 correction)."""
    means = stats.bootstrap_means(d, n_resamples=n_resamples, seed=seed)
    return float((1 + np.count_nonzero(means <= -eps + 1e-12)) / (1 + n_resamples))
