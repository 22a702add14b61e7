"""`render_status`: a `FlywheelStatus` as the plain text `tuneloop status` prints.

Plain text, not a rich table: it is read in a terminal, pasted into tickets and compared in
tests, and every line starts with what it is about. Numbers come only from the record.
"""

from __future__ import annotations

from tuneloop.flywheel.features import FeatureDrift
from tuneloop.flywheel.status import FlywheelStatus
from tuneloop.flywheel.tier_traffic import TierTraffic
from tuneloop.flywheel.triggers import TriggerDecision
from tuneloop.gate.sequence import AlphaBudget

_LABEL = 10


def _line(label: str, text: str) -> str:
    return f"{label:<{_LABEL}} {text}"


def render_status(status: FlywheelStatus) -> str:
    """The whole status, one fact per line."""
    lines = [_line("at", status.at)]
    champ = status.champion
    if champ is None:
        lines.append(
            _line(
                "champion",
                "none yet: the first round records flywheel.bootstrap as champion v1 "
                "(`tuneloop watch CONFIG`, or by hand `tuneloop run CONFIG --round next`)",
            )
        )
    else:
        run = f", run {champ.run_id}" if champ.run_id else ""
        lines.append(
            _line(
                "champion",
                f"v{champ.version} {champ.summary} (since {champ.since}, via {champ.via}{run})",
            )
        )
    t = status.traffic
    round_text = (
        f"; {t.recent} since round {status.last_round} started {status.since}"
        if status.last_round
        else " (no round yet: all traffic is new)"
    )
    lines.append(_line("traffic", f"{t.exchanges} exchanges in {len(t.files)} files{round_text}"))
    orphans = (
        f" ({t.orphan_feedback} feedback lines for unknown completions)"
        if t.orphan_feedback
        else ""
    )
    lines.extend(
        _line("", f"{path} does not exist yet: nothing served (`tuneloop watch` creates it)")
        for path in t.missing
    )
    lines.append(_line("labels", _labels_text(status) + orphans))
    lines.extend(_drift_lines(status.drift))
    if status.tiers is not None:
        lines.extend(_tier_lines(status.tiers))
    lines.append(_line("audit", _audit_text(status)))
    lines.append(_line("power", _power_text(status)))
    if status.alpha is not None:
        lines.append(_line("alpha", alpha_text(status.alpha)))
    lines.extend(_trigger_lines(status.triggers))
    return "\n".join(lines)


def _drift_lines(drift: list[FeatureDrift]) -> list[str]:
    width = max((len(d.feature) for d in drift), default=0)
    out = []
    for i, d in enumerate(drift):
        if d.psi is None:
            text = f"{d.feature:<{width}}  not measured: {d.note}"
        else:
            text = f"{d.feature:<{width}}  PSI {d.psi:.3f}  {d.band}"
        out.append(_line("drift" if i == 0 else "", text))
    return out


def _tier_lines(t: TierTraffic) -> list[str]:
    """The per-tier table, its header first, then the first tier's confidence drift."""
    total = t.traced + t.untraced
    malformed = f"; {t.malformed} malformed traces, not counted" if t.malformed else ""
    out = [_line("cascade", f"{t.traced} of {total} recent exchanges traced{malformed}")]
    width = max((len(f.tier) for f in t.tiers), default=0)
    width = max(width, len("tier"))
    if t.tiers:
        out.append(
            _line(
                "",
                f"{'tier':<{width}}  answered  coverage  asked  mean cost    mean latency",
            )
        )
    for f in t.tiers:
        out.append(
            _line(
                "",
                f"{f.tier:<{width}}  {f.answered:>8}  {f.coverage:>8.1%}  {f.asked:>5}  "
                f"${f.mean_cost_usd:<10.3g}  {f.mean_latency_s:.3f} s",
            )
        )
    c = t.confidence
    if c.psi is None:
        text = f"{c.tier or '-'}  not measured: {c.note}"
    else:
        text = (
            f"{c.tier}  PSI {c.psi:.3f}  {c.band} (later {c.recent} against earlier "
            f"{c.reference} requests, {c.bins} quantile bins)"
        )
    out.append(_line("confidence", text))
    return out


def _labels_text(status: FlywheelStatus) -> str:
    t = status.traffic
    g = t.growth
    if g is None:
        return f"{t.new_labels} new labelled rows"
    gone = ", ".join(f"{n} {step.replace('_', ' ')}" for step, n in g.removed.items() if n)
    why = f" ({gone})" if gone else ""
    note = f"; {g.note}" if g.note else ""
    return (
        f"{g.trainable} new training rows from {g.labelled} new labels after the corpus "
        f"steps{why}{note}"
    )


def _power_text(status: FlywheelStatus) -> str:
    power = status.triggers.power
    if power is None:
        return status.power_note or "not measured"
    return f"{'HELD: ' if power.held else ''}{power.text()}"


def alpha_text(budget: AlphaBudget) -> str:
    """The flywheel's α in one line: spent, remaining and the next round's."""
    if budget.rule == "none":
        return (
            f"no gate.sequence rule: {len(budget.rounds)} rounds gated, Σα {budget.spent:.3g}, "
            f"P(any false promotion) up to {budget.risk():.3f}; the next at α "
            f"{budget.next_alpha:g}"
        )
    left = f", {budget.remaining:.3g} remaining" if budget.remaining is not None else ""
    before = (
        f"; {budget.before_rule} rounds before the rule, at their own α"
        if budget.before_rule
        else ""
    )
    nxt = (
        f"round {budget.next_k} is refused: {budget.refusal}"
        if budget.refusal
        else f"round {budget.next_k} gets α {budget.next_alpha:.3g}"
    )
    return (
        f"{budget.how}: {budget.spent:.3g} spent by {len(budget.rounds)} rounds{left}; "
        f"{nxt}{before}"
    )


def _audit_text(status: FlywheelStatus) -> str:
    a = status.audit
    if a is None:
        return "not measured (no audit-part sample log of the last round)"
    low, high = a.wilson
    missing = f"; {a.not_scored} samples not scored, counted as 0" if a.not_scored else ""
    return (
        f"{a.accuracy:.3f} (95% Wilson {low:.3f}–{high:.3f}) on {a.items} items, "
        f"model {a.model}{missing}"
    )


def _trigger_lines(decision: TriggerDecision) -> list[str]:
    width = max((len(f.name) for f in decision.firings), default=0)
    out = [
        _line(
            "triggers" if i == 0 else "",
            f"{f.name:<{width}}  {'FIRES' if f.fired else 'no   '}  {f.detail}",
        )
        for i, f in enumerate(decision.firings)
    ]
    if decision.blocked_by:
        out.extend(
            _line("pacing" if i == 0 else "", why) for i, why in enumerate(decision.blocked_by)
        )
    else:
        out.append(_line("pacing", "a round may start now"))
    if decision.run:
        verdict = f"a round would start now ({', '.join(decision.fired)})"
    elif decision.fired and decision.held_for_power and not decision.blocked_by:
        verdict = "a trigger fired, but the gate cannot detect the target effect: held"
    elif decision.fired:
        verdict = "a trigger fired, but pacing holds the round"
    else:
        verdict = "no round: no trigger fired"
    out.append(_line("next", verdict))
    return out
