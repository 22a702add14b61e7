"""`tuneloop power`: how many items a comparison needs, from a pilot eval (Miller 2024).

The power formulas need sd_diff, the standard deviation of per-item score differences
between the two models to be compared. Two ways to get it:

- two pilot logs (the same items, e.g. the current champion and a candidate): sd_diff is
  measured directly;
- one pilot log: the second model is assumed to have the same item-score variance and an
  item-level correlation ρ with the first (default 0.5), so
  sd_diff = sd(item scores) · √(2 (1 − ρ)). This is an assumption, stated in the output;
  with ρ = 0.5 sd_diff equals the item-score sd. Higher ρ (similar models) needs fewer items.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tuneloop import stats
from tuneloop.errors import InputError
from tuneloop.report.delta import Log, align


@dataclass(frozen=True)
class PowerPlan:
    """The answer of `tuneloop power`."""

    n_items: int
    """Items in the pilot."""
    sd_diff: float
    """Standard deviation of per-item differences used."""
    source: str
    """How sd_diff was obtained (measured from two logs, or assumed from one)."""
    alpha: float
    """Two-sided significance level."""
    power: float
    """Desired power."""
    effect: float | None
    """Target effect; None when the MDE was asked for."""
    items_needed: int | None
    """Items needed for `effect` (None without an effect)."""
    mde: float
    """Minimum detectable effect with the pilot's number of items."""


def pilot_sd_diff(pilots: list[Log], correlation: float) -> tuple[int, float, str]:
    """(items, sd_diff, how it was obtained) from one or two pilot logs."""
    if len(pilots) == 2:
        paired = align(pilots[0], pilots[1], labels=("first pilot", "second pilot"))
        d = paired.post_scores - paired.pre_scores
        n = len(d)
        source = "measured: sd of item differences between the two pilot logs"
    elif len(pilots) == 1:
        if not -1 <= correlation < 1:
            raise InputError(f"--correlation must lie in [-1, 1), got {correlation}")
        summary, rows = pilots[0]
        paired = align((summary, rows), (summary, rows))
        scores = paired.pre_scores
        n = len(scores)
        d = scores * math.sqrt(2 * (1 - correlation))  # same variance as the assumed diffs
        source = (
            f"assumed: sd(item scores) · √(2(1 − ρ)) with item correlation ρ = {correlation:g} "
            "between the two models"
        )
    else:
        raise InputError("--pilot takes one or two sample logs")
    if n < 2:
        raise InputError(f"the pilot has {n} item(s); at least 2 are needed to estimate variance")
    return n, float(np.std(d, ddof=1)), source


def check_targets(effect: float | None, alpha: float, power: float) -> None:
    """Refuse a target effect, α or power that no pilot could make sensible (InputError)."""
    # scores lie in [0, 1], so a difference of mean scores above 1 cannot be detected at all;
    # written as `not (inside)` so that NaN is refused too
    if effect is not None and not 0 < effect <= 1:
        raise InputError(
            f"--effect must lie in (0, 1]: a difference of mean scores, which lie in [0, 1]; "
            f"got {effect}"
        )
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise InputError(f"--alpha and --power must lie in (0, 1), got {alpha} and {power}")


def plan_power(
    pilots: list[Log],
    effect: float | None = None,
    alpha: float = 0.05,
    power: float = 0.8,
    correlation: float = 0.5,
) -> PowerPlan:
    """Items needed for `effect` (two-sided test), and the MDE of the pilot's item count."""
    check_targets(effect, alpha, power)
    n, sd, source = pilot_sd_diff(pilots, correlation)
    return PowerPlan(
        n_items=n,
        sd_diff=sd,
        source=source,
        alpha=alpha,
        power=power,
        effect=effect,
        items_needed=None if effect is None else stats.items_needed(effect, sd, alpha, power),
        mde=stats.min_detectable_effect(n, sd, alpha, power),
    )
