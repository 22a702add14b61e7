"""The training-health settings of loop.yaml's `train:` section: checkpoints and stop rules.

    train:
      checkpoint: {every: 10, keep: 2}     # resumable checkpoints; a re-run resumes
      health: {on_collapse: abort, collapse_window: 10, max_kl: 0.5}

Models only, a docstring under each field (as `config.models`); `tuneloop.train.health` acts
on them. Deliberately, a non-finite loss or gradient stops training by default: every step
after it trains on NaN, and a NaN adapter would only fail later, at the doctor.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tuneloop.config.base import Section


class CheckpointConfig(Section):
    every: int = Field(default=0, ge=0)
    """Save a resumable checkpoint (adapter, optimizer, scheduler and RNG state) every N
    optimizer steps, and at the last step; 0 saves none (a killed run starts over). A re-run
    into the same output resumes from the newest one when the settings, data and base match."""
    keep: int = Field(default=2, gt=0)
    """Checkpoints kept per training stage (the newest); older ones are deleted."""


class HealthConfig(Section):
    on_nonfinite: Literal["stop", "warn"] = "stop"
    """A NaN/inf loss or gradient norm: `stop` ends training with an error (exit 3) and keeps
    the last healthy checkpoint; `warn` prints and trains on (fp16 loss scaling skips such
    steps on purpose)."""
    on_collapse: Literal["warn", "abort"] = "warn"
    """A GRPO collapse (below): `warn` prints once and trains on; `abort` ends training with
    an error (exit 3) and keeps the checkpoints."""
    collapse_window: int = Field(default=10, ge=1)
    """Logged GRPO steps in a row that must all show a collapse signal."""
    zero_std_fraction: float = Field(default=1.0, gt=0, le=1)
    """Collapse signal: at least this fraction of groups had equal rewards (TRL's
    `frac_reward_zero_std`) and the mean reward was at most `reward_floor`."""
    reward_floor: float = 0.0
    """The mean reward at or below which equal-reward groups count as a collapse."""
    max_kl: float | None = Field(default=None, gt=0)
    """Collapse signal: KL to the reference above this (logged only with `grpo.beta` > 0);
    None turns it off."""
    min_entropy: float | None = Field(default=None, ge=0)
    """Collapse signal: mean token entropy of the completions below this; None turns it off."""
