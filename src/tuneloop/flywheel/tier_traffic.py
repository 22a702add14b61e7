"""How a served cascade spread recent traffic over its tiers, and whether its first tier's
confidence drifts.

    figures = measure_tiers(recent_exchanges(traffic, since), min_requests=50)

Read from the traffic log's cascade traces (`tuneloop.tiers`, recorded per exchange by
`serve/traffic/exchange.py`); None when the recent window holds no trace, so `tuneloop status`
shows nothing of it for a single model. Over the traced exchanges of the window, per tier that
answered:

- `answered` and `coverage`: how many requests it answered, and their share of the traced ones;
- `asked`: how many requests asked it (it kept or handed off);
- `mean_cost_usd`: the mean cost of the requests it answered, every tier asked (the trace's
  `cost_usd`), and the same over all traced requests on the `all` line;
- `mean_latency_s`: their mean latency, the asked tiers' `latency_s` summed — the tiers are
  asked one after another, so this is the cascade's model time, not the proxy's wall time.

Confidence drift. The PSI (`stats.sample_psi`, deciles of the reference, the empty-bin floor
`features.PSI_EPS`, banded as the feature drift is) of the first tier's confidence — the value
it compares with its threshold — in the later half of the window against the earlier half,
by time, each half the same number of requests. Deliberately not the window against the traffic
before it: the last round may have changed the champion, which moves confidences by itself,
and the loop's drift reference (the training rows) carries no confidences; a shift within one
deployment is what moves a threshold's coverage. The first tier is the one most requests asked
first. Not measured on fewer than `min_requests` confidences (`triggers.drift_min_requests`),
nor when the first tier reports none (a rule router, a single tier).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from tuneloop import stats
from tuneloop.flywheel.exchanges import Exchange
from tuneloop.flywheel.features import PSI_EPS, Band, psi_band
from tuneloop.tiers import CascadeTrace

ALL = "all"
"""The `tier` of the figures over every traced request."""
PSI_BINS = 10
"""Quantile bins of the reference half (deciles)."""


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TierFigures(_Part):
    tier: str
    """The tier's name; `all` for every traced request."""
    answered: int
    """Requests this tier answered."""
    coverage: float
    """answered / traced requests."""
    asked: int
    """Requests that asked this tier (it kept or handed off)."""
    mean_cost_usd: float
    """Mean cost of the requests it answered, every tier asked."""
    mean_latency_s: float
    """Mean of their asked tiers' latencies summed."""


class ConfidenceDrift(_Part):
    tier: str | None
    """The first tier, whose confidence it is; None when no request was traced."""
    psi: float | None
    """PSI of the later half against the earlier half; None when not measured."""
    band: Band | None
    """stable (< 0.1), moderate (0.1–0.25), significant (> 0.25); None when not measured."""
    reference: int
    """Confidences in the earlier half."""
    recent: int
    """Confidences in the later half."""
    bins: int
    """Quantile bins of the earlier half actually used (ties merge bins)."""
    note: str | None = None
    """Why it was not measured."""


class TierTraffic(_Part):
    """A cascade's recent traffic per tier (module docstring)."""

    traced: int
    """Recent exchanges with a cascade trace."""
    untraced: int
    """Recent exchanges without one (a single model, or a malformed trace)."""
    malformed: int
    """Of those, exchanges whose cascade trace was malformed (recorded without it)."""
    tiers: list[TierFigures]
    """One per tier that answered or was asked, in cascade order, then `all`."""
    confidence: ConfidenceDrift


def measure_tiers(recent: Sequence[Exchange], *, min_requests: int) -> TierTraffic | None:
    """Per-tier figures of the traced exchanges in `recent`; None when none carries a trace
    nor a malformed one."""
    traced = sorted((e for e in recent if e.cascade is not None), key=lambda e: e.timestamp)
    malformed = sum(1 for e in recent if e.cascade_error is not None)
    if not traced and not malformed:
        return None
    traces = [e.cascade for e in traced if e.cascade is not None]
    figures = [_figures(name, traces) for name in _tier_order(traces)]
    if traces:
        figures.append(_figures(ALL, traces))
    return TierTraffic(
        traced=len(traces),
        untraced=len(recent) - len(traces),
        malformed=malformed,
        tiers=figures,
        confidence=confidence_drift(traces, min_requests),
    )


def _tier_order(traces: Sequence[CascadeTrace]) -> list[str]:
    """Tiers by the earliest place they were asked in, then by name."""
    first: dict[str, int] = {}
    for trace in traces:
        for i, step in enumerate(trace.steps):
            first[step.name] = min(first.get(step.name, i), i)
    return sorted(first, key=lambda name: (first[name], name))


def _figures(tier: str, traces: Sequence[CascadeTrace]) -> TierFigures:
    mine = [t for t in traces if tier in (ALL, t.tier)]
    n = len(mine)
    asked = sum(1 for t in traces if tier == ALL or any(s.name == tier for s in t.steps))
    return TierFigures(
        tier=tier,
        answered=n,
        coverage=n / len(traces),
        asked=asked,
        mean_cost_usd=sum(t.cost_usd for t in mine) / n if n else 0.0,
        mean_latency_s=sum(sum(s.latency_s for s in t.steps) for t in mine) / n if n else 0.0,
    )


def confidence_drift(traces: Sequence[CascadeTrace], min_requests: int) -> ConfidenceDrift:
    """PSI of the first tier's confidence, later half against earlier half of `traces` (in
    time order; module docstring)."""
    starts = Counter(t.steps[0].name for t in traces if t.steps)
    if not starts:
        return ConfidenceDrift(
            tier=None, psi=None, band=None, reference=0, recent=0, bins=0, note="no traces"
        )
    tier = min(starts, key=lambda name: (-starts[name], name))
    values = [
        s.confidence
        for t in traces
        for s in t.steps[:1]
        if s.name == tier and s.confidence is not None and not math.isnan(s.confidence)
    ]
    half = len(values) // 2
    earlier, later = values[:half], values[half:]
    note = None
    if not values:
        note = f"tier {tier} reports no confidence (a rule router, or a single tier)"
    elif len(values) < min_requests:
        note = f"{len(values)} confidences, fewer than {min_requests} (drift_min_requests)"
    if note is not None:
        return ConfidenceDrift(
            tier=tier, psi=None, band=None, reference=half, recent=len(later), bins=0, note=note
        )
    value = stats.sample_psi(earlier, later, bins=PSI_BINS, eps=PSI_EPS)
    return ConfidenceDrift(
        tier=tier,
        psi=value,
        band=psi_band(value),
        reference=len(earlier),
        recent=len(later),
        bins=len(stats.quantile_edges(earlier, PSI_BINS)) + 1,
    )
