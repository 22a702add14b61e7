"""A cascade's recent traffic per tier and its first tier's confidence drift, from exchanges."""

from __future__ import annotations

import math

import pytest

from tuneloop.config.flywheel import FlywheelConfig
from tuneloop.flywheel.exchanges import Exchange
from tuneloop.flywheel.render import render_status
from tuneloop.flywheel.status import gather_status
from tuneloop.flywheel.tier_traffic import measure_tiers
from tuneloop.tiers import CascadeTrace, TierStep


def exchange(at: float, trace: CascadeTrace | None = None, error: str | None = None) -> Exchange:
    request = {"model": "m", "messages": [{"role": "user", "content": "q"}]}
    return Exchange(at, f"c{at}", request, cascade=trace, cascade_error=error)


def threshold_trace(
    confidence: float | None, tiers: tuple[str, ...] = ("a", "b", "c")
) -> CascadeTrace:
    """Tier a keeps at confidence ≥ 0; else b, which always hands off to c."""
    steps = [
        TierStep(
            name=tiers[0],
            confidence=confidence,
            kept=confidence is not None and confidence >= 0,
            latency_s=0.1,
            cost_usd=1.0,
        )
    ]
    if not steps[0].kept:
        steps.append(
            TierStep(name=tiers[1], confidence=-1.0, kept=False, latency_s=0.2, cost_usd=2.0)
        )
        steps.append(TierStep(name=tiers[2], kept=True, latency_s=0.4, cost_usd=4.0))
    return CascadeTrace(tier=steps[-1].name, cost_usd=sum(s.cost_usd for s in steps), steps=steps)


def test_no_trace_no_figures() -> None:
    assert measure_tiers([exchange(1.0), exchange(2.0)], min_requests=1) is None
    status = gather_status(FlywheelConfig(), ledger_path=None, last_round=None, now=0.0)
    assert status.tiers is None
    assert status.to_json()["schema"] == "tuneloop.flywheel_status/3"
    assert status.to_json()["tiers"] is None
    assert "cascade" not in render_status(status)


def test_coverage_cost_and_latency_per_tier() -> None:
    recent = [exchange(float(i), threshold_trace(0.5)) for i in range(3)]
    recent.append(exchange(3.0, threshold_trace(-0.5)))
    recent.append(exchange(4.0))  # a single model's answer: not traced
    figures = measure_tiers(recent, min_requests=100)
    assert figures is not None and (figures.traced, figures.untraced, figures.malformed) == (
        4,
        1,
        0,
    )
    by = {f.tier: f for f in figures.tiers}
    assert list(by) == ["a", "b", "c", "all"]
    assert (by["a"].answered, by["a"].asked, by["a"].coverage) == (3, 4, 0.75)
    assert (by["b"].answered, by["b"].asked, by["b"].coverage) == (0, 1, 0.0)
    assert by["b"].mean_cost_usd == 0.0 and by["b"].mean_latency_s == 0.0
    assert (by["c"].answered, by["c"].mean_cost_usd) == (1, 7.0)
    assert by["c"].mean_latency_s == pytest.approx(0.7)
    assert by["all"].mean_cost_usd == pytest.approx((3 * 1.0 + 7.0) / 4)
    assert by["all"].mean_latency_s == pytest.approx((3 * 0.1 + 0.7) / 4)
    assert figures.confidence.psi is None
    assert figures.confidence.note == "4 confidences, fewer than 100 (drift_min_requests)"


def test_confidence_psi_later_half_against_earlier_half() -> None:
    # earlier 0..9 (deciles: one value per bin), later 5..9 twice: bins 6-10 hold 2 each
    values = list(range(10)) + [5, 6, 7, 8, 9] * 2
    recent = [exchange(float(i), threshold_trace(float(v))) for i, v in enumerate(values)]
    drift = measure_tiers(recent, min_requests=20)
    assert drift is not None
    c = drift.confidence
    eps = 1e-4
    expected = 5 * (0.2 - 0.1) * math.log(2) + 5 * (eps - 0.1) * math.log(eps / 0.1)
    assert (c.tier, c.reference, c.recent, c.bins) == ("a", 10, 10, 10)
    assert c.psi == pytest.approx(expected) and c.band == "significant"
    # the same window is stable against itself
    same = [exchange(float(i), threshold_trace(float(i % 10))) for i in range(20)]
    steady = measure_tiers(same, min_requests=20)
    assert steady is not None and steady.confidence.psi == 0.0
    assert steady.confidence.band == "stable"


def test_time_order_decides_the_halves() -> None:
    values = list(range(10)) + [5, 6, 7, 8, 9] * 2
    shuffled = [exchange(float(i), threshold_trace(float(v))) for i, v in enumerate(values)]
    shuffled = shuffled[10:] + shuffled[:10]  # the log's order is not the time order
    ordered = measure_tiers(shuffled, min_requests=20)
    assert ordered is not None and ordered.confidence.psi is not None
    assert ordered.confidence.psi > 1.0


def test_a_first_tier_without_confidence_and_malformed_traces_are_said() -> None:
    rule = CascadeTrace(
        tier="b",
        cost_usd=2.0,
        route="rule 1",
        steps=[TierStep(name="b", kept=True, latency_s=0.2, cost_usd=2.0)],
    )
    recent = [exchange(float(i), rule) for i in range(3)]
    recent.append(exchange(9.0, error="tuneloop_cascade.steps.0.kept: Field required"))
    figures = measure_tiers(recent, min_requests=1)
    assert figures is not None and figures.malformed == 1 and figures.untraced == 1
    assert (
        figures.confidence.note == "tier b reports no confidence (a rule router, or a single tier)"
    )
    only_bad = measure_tiers(recent[3:], min_requests=1)
    assert only_bad is not None and only_bad.tiers == [] and only_bad.confidence.note == "no traces"
    bare = gather_status(FlywheelConfig(), ledger_path=None, last_round=None, now=0.0)
    status = bare.model_copy(update={"tiers": only_bad})
    text = render_status(status)
    assert "cascade    0 of 1 recent exchanges traced; 1 malformed traces, not counted" in text
    assert "confidence -  not measured: no traces" in text


def test_infinite_confidences_bin_like_any_value_and_nan_is_left_out() -> None:
    values = [0.1, 0.2, math.inf, math.inf, math.nan, 0.1, 0.2, math.inf, math.inf]
    recent = [exchange(float(i), threshold_trace(v)) for i, v in enumerate(values)]
    figures = measure_tiers(recent, min_requests=8)
    assert figures is not None
    c = figures.confidence
    assert (c.reference, c.recent, c.psi, c.band) == (4, 4, 0.0, "stable")
