"""Triggers and pacing, table-driven: what fires, what pacing refuses, backoff, daily caps."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from pydantic import ValidationError

from tuneloop.config.flywheel import FlywheelConfig, TriggersConfig
from tuneloop.flywheel.triggers import (
    Observations,
    PacingState,
    after_poll,
    after_round,
    evaluate_triggers,
)
from tuneloop.loop.rounds.power import GatePower

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc).timestamp()
TODAY, YESTERDAY = "2026-12-01", "2026-11-30"
MIDNIGHT = datetime(2026, 12, 2, tzinfo=timezone.utc).timestamp()
HOUR = 3600.0

CONFIG = TriggersConfig(
    min_new_labels=100,
    drift_psi=0.25,
    drift_min_requests=50,
    accuracy_floor=0.8,
    min_interval_s=HOUR,
    backoff_factor=2.0,
    max_backoff_s=6 * HOUR,
    max_rounds_per_day=3,
    max_train_seconds_per_day=1000.0,
)
QUIET = Observations(new_labels=0, recent_requests=0)


def obs(**kw: object) -> Observations:
    return QUIET.model_copy(update=kw)


@pytest.mark.parametrize(
    ("observed", "fired", "values"),
    [
        (QUIET, [], {"new_labels": 0, "drift": None, "accuracy": None}),
        (obs(new_labels=99), [], {"new_labels": 99}),
        (obs(new_labels=100), ["new_labels"], {"new_labels": 100}),
        # drift is not judged on fewer than drift_min_requests requests, whatever the PSI
        (obs(recent_requests=49, drift={"tag": 2.0}), [], {"drift": None}),
        (
            obs(recent_requests=50, drift={"tag": 0.2, "prompt_words": 0.25}),
            ["drift"],
            {"drift": 0.25},
        ),
        (obs(recent_requests=50, drift={"tag": 0.24, "locale": None}), [], {"drift": 0.24}),
        (obs(recent_requests=50, drift={"locale": None}), [], {"drift": None}),
        # accuracy fires on the Wilson upper bound, not the point estimate
        (obs(audit_accuracy=0.7, audit_upper=0.85), [], {"accuracy": 0.85}),
        (obs(audit_accuracy=0.7, audit_upper=0.79), ["accuracy"], {"accuracy": 0.79}),
        (
            obs(
                new_labels=500,
                recent_requests=80,
                drift={"tag": 0.5},
                audit_accuracy=0.5,
                audit_upper=0.6,
            ),
            ["new_labels", "drift", "accuracy"],
            {},
        ),
    ],
)
def test_which_triggers_fire(observed: Observations, fired: list[str], values: dict) -> None:
    decision = evaluate_triggers(observed, CONFIG, PacingState(), NOW)
    assert decision.fired == fired
    by_name = {f.name: f for f in decision.firings}
    assert list(by_name) == ["new_labels", "drift", "accuracy"]
    for name, value in values.items():
        assert by_name[name].value == value
    assert decision.run == bool(fired)


def test_a_trigger_that_is_off_is_not_listed() -> None:
    only_labels = TriggersConfig(min_new_labels=5)
    decision = evaluate_triggers(obs(new_labels=5), only_labels, PacingState(), NOW)
    assert [f.name for f in decision.firings] == ["new_labels"]
    assert decision.firings[0].detail == "5 new labelled rows (fires at 5)"


def pace(**kw: object) -> PacingState:
    return PacingState(**{"day": TODAY, **kw})


@pytest.mark.parametrize(
    ("pacing", "blocked", "allowed_at"),
    [
        (PacingState(), [], NOW),
        (pace(last_round_at=NOW - 0.5 * HOUR), ["min interval"], NOW + 0.5 * HOUR),
        (pace(last_round_at=NOW - HOUR), [], NOW),
        # two rejects in a row: 1 h × 2² = 4 h between starts
        (pace(last_round_at=NOW - 3 * HOUR, consecutive_rejects=2), ["backoff"], NOW + HOUR),
        (pace(last_round_at=NOW - 4 * HOUR, consecutive_rejects=2), [], NOW),
        # ten rejects: 1 h × 2¹⁰ capped at max_backoff_s = 6 h
        (pace(last_round_at=NOW - 5 * HOUR, consecutive_rejects=10), ["backoff"], NOW + HOUR),
        (pace(last_round_at=NOW - 6 * HOUR, consecutive_rejects=10), [], NOW),
        (pace(rounds_today=3), ["daily cap"], MIDNIGHT),
        (pace(rounds_today=2, train_seconds_today=1000.0), ["daily cap"], MIDNIGHT),
        (pace(rounds_today=3, train_seconds_today=5000.0), ["daily cap", "daily cap"], MIDNIGHT),
        # yesterday's counts do not count today
        (PacingState(day=YESTERDAY, rounds_today=3, train_seconds_today=5000.0), [], NOW),
        (pace(last_round_at=NOW - 60, rounds_today=3), ["min interval", "daily cap"], MIDNIGHT),
    ],
)
def test_pacing(pacing: PacingState, blocked: list[str], allowed_at: float) -> None:
    decision = evaluate_triggers(obs(new_labels=100), CONFIG, pacing, NOW)
    assert [b.split(":")[0] for b in decision.blocked_by] == blocked
    assert decision.allowed_at == pytest.approx(allowed_at)
    assert decision.run == (not blocked)


def test_pacing_messages_carry_the_figures() -> None:
    decision = evaluate_triggers(
        obs(new_labels=100),
        CONFIG,
        pace(last_round_at=NOW - 3 * HOUR, consecutive_rejects=2, rounds_today=3),
        NOW,
    )
    assert decision.blocked_by == [
        "backoff: 14400 s between round starts (2 rejected in a row); 3600 s to go",
        "daily cap: 3 rounds today (max_rounds_per_day)",
    ]


@pytest.mark.parametrize(
    ("idle", "observed", "wait"),
    [
        (0, QUIET, 60.0),
        (1, QUIET, 120.0),
        (3, QUIET, 480.0),
        (12, QUIET, 6 * HOUR),
        (10_000, QUIET, 6 * HOUR),
        (3, obs(new_labels=100), 60.0),
    ],
)
def test_polls_back_off_while_nothing_fires(idle: int, observed: Observations, wait: float) -> None:
    decision = evaluate_triggers(observed, CONFIG, PacingState(idle_polls=idle), NOW, poll_s=60.0)
    assert decision.next_poll_s == wait


def test_state_updates_after_polls_and_rounds() -> None:
    state = after_poll(after_poll(PacingState(), fired=False), fired=False)
    assert state.idle_polls == 2
    assert after_poll(state, fired=True).idle_polls == 0
    state = after_round(state, started_at=NOW, train_seconds=300.0, promoted=False)
    assert state == PacingState(
        last_round_at=NOW,
        consecutive_rejects=1,
        day=TODAY,
        rounds_today=1,
        train_seconds_today=300.0,
    )
    state = after_round(state, started_at=NOW + HOUR, train_seconds=200.0, promoted=False)
    assert (state.consecutive_rejects, state.rounds_today, state.train_seconds_today) == (
        2,
        2,
        500.0,
    )
    state = after_round(state, started_at=MIDNIGHT + 1, train_seconds=50.0, promoted=True)
    assert (state.consecutive_rejects, state.day, state.rounds_today) == (0, "2026-12-02", 1)
    assert state.train_seconds_today == 50.0


def test_config_needs_a_trigger_and_rejects_reserved_features() -> None:
    with pytest.raises(ValidationError, match="no trigger is set"):
        TriggersConfig(min_new_labels=None)
    with pytest.raises(ValidationError, match="always measured"):
        TriggersConfig(features=["tag"])
    with pytest.raises(ValidationError, match="given twice"):
        TriggersConfig(features=["locale", "locale"])
    with pytest.raises(ValidationError, match="extra"):
        FlywheelConfig.model_validate({"triggers": {"min_labels": 3}})
    assert not FlywheelConfig().approval.promote and not FlywheelConfig().approval.spend


def _power(held: bool) -> GatePower:
    return GatePower(
        slice="gate-002",
        items=50,
        alpha=0.05,
        sd_diff=0.5,
        source="pilot",
        mde=0.176,
        target=0.05,
        factor=2.0,
        needed=155,
        held=held,
    )


def test_power_holds_a_fired_round_and_pacing_is_reported_apart() -> None:
    fired = obs(new_labels=120, labelled=400, power=_power(held=True))
    decision = evaluate_triggers(fired, CONFIG, pace(), now=NOW)
    assert decision.fired == ["new_labels"] and decision.held_for_power
    assert not decision.run and decision.blocked_by == []
    assert decision.firings[0].detail == "120 new training rows from 400 new labels (fires at 100)"
    assert "needs 105 more gate items" in (decision.power.text() if decision.power else "")
    released = fired.model_copy(update={"power": _power(held=False)})
    assert evaluate_triggers(released, CONFIG, pace(), now=NOW).run
