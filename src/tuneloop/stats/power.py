"""Power analysis for a paired comparison of two models on the same items (Miller 2024).

Normal approximation for the mean of paired differences with standard deviation sd_diff:
MDE = (z_{1−α/2} + z_{power}) · sd_diff / √n, and items needed n = ⌈((z_{1−α/2} + z_{power}) ·
sd_diff / effect)²⌉ — Miller (2024), "Adding Error Bars to Evals", §5 (sample-size formula
with the variance term ω² + σ²_A/K_A + σ²_B/K_B replaced by the observed variance of
item-level differences, which already contains the sampling noise at the K used).
Two-sided by default (as the paper); `two_sided=False` uses z_{1−α} for a one-sided test,
as the gate's pre-registered one-sided bar does. Run `pytest tests/stats/test_power.py`.
"""

from __future__ import annotations

import math

from scipy.special import ndtri


def _z_sum(alpha: float, power: float, two_sided: bool) -> float:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    if not 0 < power < 1:
        raise ValueError(f"power must lie in (0, 1), got {power}")
    z_alpha = float(ndtri(1.0 - alpha / 2.0)) if two_sided else float(ndtri(1.0 - alpha))
    return z_alpha + float(ndtri(power))


def min_detectable_effect(
    n_items: int, sd_diff: float, alpha: float = 0.05, power: float = 0.8, two_sided: bool = True
) -> float:
    """Smallest true mean difference detected with probability `power` at level `alpha`."""
    if n_items < 1:
        raise ValueError(f"n_items must be >= 1, got {n_items}")
    if sd_diff < 0:
        raise ValueError(f"sd_diff must be >= 0, got {sd_diff}")
    return _z_sum(alpha, power, two_sided) * sd_diff / math.sqrt(n_items)


def items_needed(
    effect: float, sd_diff: float, alpha: float = 0.05, power: float = 0.8, two_sided: bool = True
) -> int:
    """Items needed to detect a true mean difference `effect` (> 0) with `power`."""
    if effect <= 0:
        raise ValueError(f"effect must be > 0, got {effect}")
    if sd_diff < 0:
        raise ValueError(f"sd_diff must be >= 0, got {sd_diff}")
    n = (_z_sum(alpha, power, two_sided) * sd_diff / effect) ** 2
    return max(1, math.ceil(n))
