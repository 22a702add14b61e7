"""When the flywheel starts a round: which triggers fire, and whether pacing lets one run now.

    decision = evaluate_triggers(observations, cfg.flywheel.triggers, pacing, now=time.time())
    if decision.run: ...start a round...; pacing = after_round(pacing, started_at=now, ...)
    else: pacing = after_poll(pacing, fired=bool(decision.fired))

Pure functions over plain records: the watcher observes (labels, drift, audit accuracy),
keeps a `PacingState` between looks, and asks. Triggers (each off when its setting is None):

- `new_labels`: at least `min_new_labels` new training rows from exchanges labelled since the
  last round started — counted after the corpus steps (`flywheel.growth`), so 49 copies of one
  prompt are one row;
- `drift`: some measured feature's PSI ≥ `drift_psi`, judged only on at least
  `drift_min_requests` recent requests;
- `accuracy`: the champion's audit accuracy is below `accuracy_floor` *with confidence* —
  the upper end of its Wilson interval is below the floor. Deliberately not the point
  estimate: on a small audit part the point estimate dips below a floor by chance alone, and
  a round is compute spent.

Power holds a round a trigger called for when the next gate slice cannot detect the target
effect (`loop.rounds.power`: its MDE above `power_factor` × the target); adding gate items
releases it. The MDE is stated at every look, held or not.

Pacing, each a reason a round is refused even when a trigger fired:
`min_interval_s` × `backoff_factor`^(consecutive rejected rounds), capped at
`max_backoff_s`, between round starts; at most `max_rounds_per_day` rounds and
`max_train_seconds_per_day` training seconds per UTC day. The same backoff stretches the
wait between polls after consecutive polls where nothing fired (`next_poll_s`).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from pydantic import BaseModel, ConfigDict

from tuneloop.config.flywheel import TriggersConfig
from tuneloop.loop.rounds.power import GatePower


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Observations(_Frozen):
    """What the watcher saw at one look."""

    new_labels: int
    """New training rows from exchanges labelled since the last round started (after the
    corpus steps; what `min_new_labels` counts)."""
    labelled: int | None = None
    """Exchanges labelled since then, before the corpus steps; None: not counted apart."""
    recent_requests: int
    """Exchanges since the last round started (what drift is measured on)."""
    drift: dict[str, float | None] = {}
    """PSI per feature; None where not measured."""
    audit_accuracy: float | None = None
    """The champion's audit-part accuracy; None when not measured."""
    audit_upper: float | None = None
    """Upper end of its Wilson interval."""
    power: GatePower | None = None
    """The next round's gate power; None: not measured."""


class PacingState(_Frozen):
    """What pacing remembers between looks (the watcher persists it)."""

    last_round_at: float | None = None
    """Unix seconds when the last round started; None before the first."""
    consecutive_rejects: int = 0
    """Rounds rejected in a row since the last promotion."""
    idle_polls: int = 0
    """Polls in a row where no trigger fired."""
    day: str | None = None
    """The UTC date (YYYY-MM-DD) the two daily counts belong to."""
    rounds_today: int = 0
    train_seconds_today: float = 0.0


class TriggerFiring(_Frozen):
    """One configured trigger at one look."""

    name: str
    """`new_labels`, `drift` or `accuracy`."""
    fired: bool
    value: float | None
    """The observed figure (count, largest PSI, Wilson upper bound); None when not measured."""
    threshold: float
    detail: str
    """The figures in words."""


class TriggerDecision(_Frozen):
    firings: list[TriggerFiring]
    """Every configured trigger, fired or not."""
    blocked_by: list[str]
    """Why pacing refuses a round now (empty when it allows one)."""
    allowed_at: float
    """Earliest unix time pacing allows a round: `now` when it does, the next UTC midnight
    under a daily cap."""
    next_poll_s: float
    """How long to wait before the next look: `poll_s`, stretched by the backoff after
    consecutive looks where nothing fired. (Where a trigger fired but pacing refused, the
    watcher may instead wait until `allowed_at`.)"""
    power: GatePower | None = None
    """The next round's gate power (its MDE); a round held for it does not start."""

    @property
    def fired(self) -> list[str]:
        return [f.name for f in self.firings if f.fired]

    @property
    def held_for_power(self) -> bool:
        return self.power is not None and self.power.held

    @property
    def run(self) -> bool:
        """A trigger fired, pacing allows a round and power does not hold it."""
        return bool(self.fired) and not self.blocked_by and not self.held_for_power


def utc_day(when: float) -> str:
    return datetime.fromtimestamp(when, timezone.utc).date().isoformat()


def evaluate_triggers(
    observations: Observations,
    config: TriggersConfig,
    pacing: PacingState,
    now: float,
    *,
    poll_s: float = 300.0,
) -> TriggerDecision:
    """Which triggers fire on `observations`, and whether pacing allows a round at `now`."""
    firings = _firings(observations, config)
    blocked, allowed_at = _pacing(config, pacing, now)
    fired = any(f.fired for f in firings)
    idle = 0 if fired else pacing.idle_polls
    return TriggerDecision(
        firings=firings,
        blocked_by=blocked,
        allowed_at=allowed_at,
        next_poll_s=_backoff(poll_s, idle, config),
        power=observations.power,
    )


def _backoff(base: float, steps: int, config: TriggersConfig) -> float:
    if steps == 0:
        return base
    # factor ** steps overflows a float long before a watcher could count that many steps
    grown = base * config.backoff_factor ** min(steps, 1000)
    return max(base, min(grown, config.max_backoff_s))


def _firings(obs: Observations, config: TriggersConfig) -> list[TriggerFiring]:
    out = []
    if config.min_new_labels is not None:
        need = config.min_new_labels
        raw = (
            f"new training rows from {obs.labelled} new labels"
            if obs.labelled is not None
            else "new labelled rows"
        )
        out.append(
            TriggerFiring(
                name="new_labels",
                fired=obs.new_labels >= need,
                value=obs.new_labels,
                threshold=need,
                detail=f"{obs.new_labels} {raw} (fires at {need})",
            )
        )
    if config.drift_psi is not None:
        out.append(_drift_firing(obs, config.drift_psi, config.drift_min_requests))
    if config.accuracy_floor is not None:
        out.append(_accuracy_firing(obs, config.accuracy_floor))
    return out


def _drift_firing(obs: Observations, threshold: float, min_requests: int) -> TriggerFiring:
    measured = {k: v for k, v in obs.drift.items() if v is not None}
    if obs.recent_requests < min_requests or not measured:
        why = (
            f"{obs.recent_requests} recent requests (judged from {min_requests})"
            if obs.recent_requests < min_requests
            else "no feature measured"
        )
        return TriggerFiring(
            name="drift", fired=False, value=None, threshold=threshold, detail=f"not judged: {why}"
        )
    feature = max(sorted(measured), key=lambda k: measured[k])
    worst = measured[feature]
    return TriggerFiring(
        name="drift",
        fired=worst >= threshold,
        value=worst,
        threshold=threshold,
        detail=f"largest PSI {worst:.3f} on '{feature}' (fires at {threshold:g})",
    )


def _accuracy_firing(obs: Observations, floor: float) -> TriggerFiring:
    if obs.audit_accuracy is None or obs.audit_upper is None:
        return TriggerFiring(
            name="accuracy",
            fired=False,
            value=None,
            threshold=floor,
            detail="not judged: no audit accuracy measured",
        )
    return TriggerFiring(
        name="accuracy",
        fired=obs.audit_upper < floor,
        value=obs.audit_upper,
        threshold=floor,
        detail=(
            f"audit accuracy {obs.audit_accuracy:.3f}, 95% upper bound {obs.audit_upper:.3f} "
            f"(fires below {floor:g})"
        ),
    )


def _pacing(config: TriggersConfig, pacing: PacingState, now: float) -> tuple[list[str], float]:
    blocked: list[str] = []
    allowed_at = now
    if pacing.last_round_at is not None:
        gap = _backoff(config.min_interval_s, pacing.consecutive_rejects, config)
        ready = pacing.last_round_at + gap
        if now < ready:
            kind = "min interval" if pacing.consecutive_rejects == 0 else "backoff"
            blocked.append(
                f"{kind}: {gap:.0f} s between round starts "
                f"({pacing.consecutive_rejects} rejected in a row); {ready - now:.0f} s to go"
            )
            allowed_at = ready
    today = utc_day(now)
    rounds = pacing.rounds_today if pacing.day == today else 0
    seconds = pacing.train_seconds_today if pacing.day == today else 0.0
    cap_hit = False
    if config.max_rounds_per_day is not None and rounds >= config.max_rounds_per_day:
        blocked.append(f"daily cap: {rounds} rounds today (max_rounds_per_day)")
        cap_hit = True
    cap_s = config.max_train_seconds_per_day
    if cap_s is not None and seconds >= cap_s:
        blocked.append(f"daily cap: {seconds:.0f} training seconds today (of {cap_s:g})")
        cap_hit = True
    if cap_hit:
        midnight = datetime.fromisoformat(today).replace(tzinfo=timezone.utc) + timedelta(days=1)
        allowed_at = max(allowed_at, midnight.timestamp())
    return blocked, allowed_at


def after_poll(pacing: PacingState, *, fired: bool) -> PacingState:
    """The state after a look that started no round."""
    return pacing.model_copy(update={"idle_polls": 0 if fired else pacing.idle_polls + 1})


def after_round(
    pacing: PacingState, *, started_at: float, train_seconds: float, promoted: bool
) -> PacingState:
    """The state after a round that started at `started_at` has finished."""
    day = utc_day(started_at)
    same_day = pacing.day == day
    return PacingState(
        last_round_at=started_at,
        consecutive_rejects=0 if promoted else pacing.consecutive_rejects + 1,
        idle_polls=0,
        day=day,
        rounds_today=(pacing.rounds_today if same_day else 0) + 1,
        train_seconds_today=(pacing.train_seconds_today if same_day else 0.0) + train_seconds,
    )
