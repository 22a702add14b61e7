"""The training-health settings of loop.yaml's `train:` section: checkpoints and stop rules.

    train:
      checkpoint: {every: 10, keep: 2}     # resumable checkpoints; a re-run resumes
      health: {on_collapse: abort, collapse_window: 10, max_kl: 0.5, reward_drop: 0.2}

Models only, a docstring under each field (as `config.models`); `tuneloop.train.health` acts
on them during training and `tuneloop.train.walkback` after it. Deliberately, a non-finite loss
or gradient stops training by default: every step after it trains on NaN, and a NaN adapter
would only fail later, at the doctor. And deliberately, a run that ends unhealthy walks back to
its newest healthy checkpoint by default (`on_unhealthy: walk_back`) rather than failing the
round: the checkpoint is chosen from the training log and the weights alone, never from an
eval score, so the gate still judges the result on a slice nothing was selected on, and the
record says which checkpoint and why. Its cost: an unhealthy run no longer stops the loop at
the train phase, so the walk-back must be read in `train_settings.json` or the capstone.
Walking back needs checkpoints: with `checkpoint.every: 0` (the default) there is none, and
an unhealthy end fails the phase as with `on_unhealthy: fail`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tuneloop.config.base import Section


class CheckpointConfig(Section):
    every: int = Field(default=0, ge=0)
    """Save a resumable checkpoint (adapter, optimizer, scheduler and RNG state) every N
    optimizer steps, and at the last step; 0 saves none (a killed run starts over, and an
    unhealthy end has nothing to walk back to). A re-run into the same output resumes from the
    newest one when the settings, data and base match."""
    keep: int = Field(default=2, gt=0)
    """Checkpoints kept per training stage (the newest); older ones are deleted. A collapse
    abort can walk back past its window only when (keep − 1) × every ≥ collapse_window − 1."""


class HealthConfig(Section):
    on_nonfinite: Literal["stop", "warn"] = "stop"
    """A NaN/inf loss or gradient norm: `stop` ends training (then `on_unhealthy` applies)
    before that step's checkpoint is saved; `warn` prints and trains on (fp16 loss scaling
    skips such steps on purpose)."""
    on_collapse: Literal["warn", "abort"] = "warn"
    """A GRPO collapse (below): `warn` prints once and trains on; `abort` ends training
    (then `on_unhealthy` applies) before that step's checkpoint is saved."""
    on_unhealthy: Literal["walk_back", "fail"] = "walk_back"
    """When training ends unhealthy (a stop above, or a `reward_drop`): `walk_back` publishes
    the newest checkpoint of the method's stage that passes the health checks (finite weights;
    no non-finite loss or collapse in the log up to it; its reward not down by `reward_drop`),
    chosen without any eval score and recorded in `train_settings.json`; `fail` ends the phase
    with an error (exit 3) and keeps the checkpoints. Either fails when no checkpoint passes."""
    collapse_window: int = Field(default=10, ge=1)
    """Logged GRPO steps in a row that must all show a collapse signal; also the logged steps
    averaged for the reward at the start, at the end and at a checkpoint (`reward_drop`)."""
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
    reward_drop: float | None = Field(default=None, gt=0)
    """A GRPO run ends unhealthy when its mean reward over the last `collapse_window` logged
    steps is below the mean over the first `collapse_window` by more than this (in the
    scorer's units); None turns it off. Off by default: what a drop means depends on the
    scorer's scale."""
