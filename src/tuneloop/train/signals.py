"""The health signals of a training log: pure functions over metrics.jsonl rows.

One definition of "unhealthy" for both places that judge it: `health.HealthCallback`, which
watches each logged step while training runs, and `walkback.py`, which checks a checkpoint
against the log after training ended unhealthy. A row is a plain mapping with `step`, `phase`
and our names for the logged values (`metrics.metrics_row`).

- `nonfinite`: a NaN or infinite `loss` or `grad_norm`.
- `collapse_warning`: GRPO has collapsed when, for `COLLAPSE_WINDOW` logged steps in a row,
  every group's rewards were equal (TRL's `frac_reward_zero_std`) at a mean reward of 0 — no
  group has a spread, nothing can be learned and the run will not recover — or, when bounds
  are set, the KL to the reference stayed above one or the completions' entropy below one.
  Measured on the arith demo at lr 2e-3: the reward hit 0 by step ~90, the warning fired at
  step 112 of 190, and the merged model answered 0.3% of the suite; at lr 5e-4 it never fired.
  `collapse_onset` is where the first such window began: a checkpoint from that step on is
  inside the collapse, although the window was not yet full when it was saved.
- `reward_at` / `reward_drop` (`train.health.reward_drop`): the reward is compared as means
  over a window of logged steps (`collapse_window`), never as single steps: one GRPO step's
  reward is the mean of a few groups and moves by more than a typical drop. "Start" is the
  mean over the first window, "end" over the last, a checkpoint's over the window ending at it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tuneloop.config.health import HealthConfig

Row = Mapping[str, Any]

WATCHED = ("loss", "grad_norm")
"""Logged values that must be finite."""

COLLAPSE_WINDOW = HealthConfig().collapse_window
"""Logged steps in a row that must show a collapse signal (`train.health.collapse_window`)."""


def nonfinite(logs: Row) -> list[str]:
    """Pure: `key=value` for each watched value in `logs` that is NaN or infinite."""
    return [
        f"{k}={logs[k]}"
        for k in WATCHED
        if isinstance(logs.get(k), int | float) and not math.isfinite(logs[k])
    ]


def collapse_bounds(h: HealthConfig) -> dict[str, Any]:
    """The keyword arguments of the collapse functions below, from `train.health`."""
    return {
        "zero_std_fraction": h.zero_std_fraction,
        "reward_floor": h.reward_floor,
        "max_kl": h.max_kl,
        "min_entropy": h.min_entropy,
    }


def collapse_signals(
    *,
    zero_std_fraction: float = 1.0,
    reward_floor: float = 0.0,
    max_kl: float | None = None,
    min_entropy: float | None = None,
) -> list[tuple[str, Callable[[Row], bool]]]:
    """Pure: each collapse signal that is on, as (its words, whether one row shows it).

    `frac_zero_spread` ≥ `zero_std_fraction` with `reward_mean` ≤ `reward_floor`; `kl` >
    `max_kl`; `entropy` < `min_entropy` (a bound of None is off; a row without the value does
    not show the signal).
    """
    signals: list[tuple[str, Callable[[Row], bool]]] = [
        (
            f"reward ≤ {reward_floor:g} with equal rewards in ≥ {zero_std_fraction:.0%} of groups",
            lambda r: (
                r["reward_mean"] <= reward_floor
                and r.get("frac_zero_spread", 1.0) >= zero_std_fraction
            ),
        )
    ]
    if max_kl is not None:
        signals.append((f"KL > {max_kl:g}", lambda r: r.get("kl", -math.inf) > max_kl))
    if min_entropy is not None:
        signals.append(
            (f"entropy < {min_entropy:g}", lambda r: r.get("entropy", math.inf) < min_entropy)
        )
    return signals


def rewarded(rows: Sequence[Row]) -> list[Row]:
    """The GRPO rows: those that log a reward (SFT rows and a warm-up's carry none)."""
    return [r for r in rows if "reward_mean" in r]


def collapse_warning(
    rows: Sequence[Row], window: int = COLLAPSE_WINDOW, **bounds: Any
) -> str | None:
    """Pure: what collapsed over the last `window` GRPO rows (a signal in every row), or None.

    `bounds` are `collapse_signals`' keywords."""
    recent = rewarded(rows)[-window:]
    if len(recent) < window:
        return None
    fired = [name for name, holds in collapse_signals(**bounds) if all(holds(r) for r in recent)]
    if not fired:
        return None
    return (
        f"{recent[-1].get('phase', 'train')}: {' and '.join(fired)} for the last {window} "
        f"logged steps (through step {recent[-1]['step']}): the policy has likely collapsed "
        "and nothing more can be learned; consider a lower learning rate"
    )


def collapse_onset(rows: Sequence[Row], window: int = COLLAPSE_WINDOW, **bounds: Any) -> int | None:
    """Pure: the step where the first collapse began — the first row of the first `window`
    GRPO rows in a row that all show one signal — or None when no signal held that long."""
    graded = rewarded(rows)
    onsets = []
    for _, holds in collapse_signals(**bounds):
        run = 0
        for i, row in enumerate(graded):
            run = run + 1 if holds(row) else 0
            if run == window:
                onsets.append(int(graded[i - window + 1]["step"]))
                break
    return min(onsets, default=None)


def _mean_reward(rows: Sequence[Row]) -> float | None:
    values = [float(r["reward_mean"]) for r in rows if math.isfinite(r["reward_mean"])]
    return sum(values) / len(values) if values else None


def reward_start(rows: Sequence[Row], window: int) -> float | None:
    """Pure: the mean reward over the first `window` GRPO rows (None: no reward logged)."""
    return _mean_reward(rewarded(rows)[:window])


def reward_at(rows: Sequence[Row], step: int, window: int) -> float | None:
    """Pure: the mean reward over the last `window` GRPO rows up to `step`."""
    return _mean_reward([r for r in rewarded(rows) if r["step"] <= step][-window:])


def reward_drop(rows: Sequence[Row], window: int, drop: float) -> str | None:
    """Pure: why the run ended unhealthy, when its end reward (the last `window` GRPO rows) is
    below its start (the first `window`) by more than `drop`; None otherwise."""
    graded = rewarded(rows)
    if not graded:
        return None
    last = int(graded[-1]["step"])
    start, end = reward_start(graded, window), reward_at(graded, last, window)
    if start is None or end is None or end >= start - drop:
        return None
    n = min(window, len(graded))
    return (
        f"the mean reward over the last {n} logged steps ({end:.3g}) fell below its start, the "
        f"first {n} ({start:.3g}), by {start - end:.3g} (train.health.reward_drop: {drop:g})"
    )
