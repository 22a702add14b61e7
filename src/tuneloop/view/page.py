"""The dashboard page: a `Dashboard` (view/history.py) rendered to one self-contained HTML file.

    html = render_dashboard(gather(sources))

It has its own jinja2 environment (autoescaping every value, as the report page's does) and
template (`view/templates/dashboard.html.j2`, with `dashboard.css`), and shares with
report.html what the report offers for it (`report/templating.py`: its stylesheet
`report.css` and number filters; `report/svg.py`'s inline charts). No script, no font, no
URL: the Content-Security-Policy is `default-src 'none'` with inline styles only, so
the file opens from disk and from the served app alike. The only markup not produced by
escaping is the SVG (`svg.py` escapes the text it places) and the experiment log's `code`
and **bold** spans, which are applied after escaping (`inline_markdown`).

The error budget (`gate.sequence`, `gate.sequence.alpha_budget`): α spent and remaining, the
next round's α, and per round its α_k (`budget_text`, `alpha_of`).

Charts, each drawn only when something was measured:
- Δ per round with its 95% CI (forest plot; promoted rounds in bold);
- drift: PSI per feature at the look that started each round;
- audit accuracy: champion (pre) and challenger (post) with Wilson 95% bands.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuneloop import stats
from tuneloop.flywheel.status import iso
from tuneloop.gate.sequence import AlphaBudget, SpentAlpha
from tuneloop.report import svg
from tuneloop.report.templating import NUMBER_FILTERS
from tuneloop.report.templating import TEMPLATES as REPORT_TEMPLATES
from tuneloop.view.history import ChampionEvent, Dashboard, RoundView

TEMPLATES = Path(__file__).parent / "templates"
"""The dashboard's own templates (packaged with the wheel)."""
TEMPLATE = "dashboard.html.j2"


@dataclass(frozen=True)
class Chart:
    id: str
    title: str
    svg: str
    caption: str


@dataclass(frozen=True)
class TimelineItem:
    """A round, or a champion that did not come from a round (bootstrap, registered)."""

    at: str
    round: RoundView | None = None
    champion: ChampionEvent | None = None


def inline_markdown(text: str) -> Any:
    """Escaped text with `code` and **bold** spans as markup (nothing else is ever markup)."""
    from markupsafe import Markup, escape

    out = str(escape(text))
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    out = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", out)
    return Markup(out)


def timeline(d: Dashboard) -> list[TimelineItem]:
    """Rounds and champion versions outside rounds, oldest first (a bootstrap champion
    before the round that starts from it)."""
    from_runs = {r.run_id for r in d.rounds if r.run_id}
    items = [TimelineItem(r.started_at, round=r) for r in d.rounds]
    items += [
        TimelineItem(c.since, champion=c)
        for c in d.champions
        if c.run_id is None or c.run_id not in from_runs
    ]
    return sorted(items, key=lambda t: (t.at, t.champion is None))


def forest_chart(rounds: list[RoundView]) -> Chart | None:
    measured = [r for r in rounds if r.delta is not None]
    if not measured:
        return None
    rows = [
        svg.ForestRow(
            f"{r.key} {r.decision_text}",
            r.delta.delta,
            r.delta.low,
            r.delta.high,
            bold=r.decision == "promoted",
        )
        for r in measured
        if r.delta is not None
    ]
    where = sorted({r.delta.where for r in measured if r.delta is not None})
    return Chart(
        "forest",
        "Δ per round with its 95% CI",
        svg.forest(rows, axis="Δ challenger − champion (points)"),
        f"Paired Δ in mean item score on the {' / '.join(where)}, with the paired bootstrap "
        "95% CI; promoted rounds in bold.",
    )


def drift_chart(rounds: list[RoundView]) -> Chart | None:
    looked = [(i + 1, r) for i, r in enumerate(rounds) if r.look is not None and r.look.drift]
    features = sorted({f for _, r in looked if r.look for f in r.look.drift})
    series = []
    for feature in features:
        xs, ys = [], []
        for x, r in looked:
            value = r.look.drift.get(feature) if r.look else None
            xs.append(float(x))
            ys.append(math.nan if value is None else float(value))
        if any(math.isfinite(y) for y in ys):
            series.append(svg.Series(feature, xs, ys))
    if not series:
        return None
    bars = {r.drift_threshold for _, r in looked if r.drift_threshold is not None}
    if len(bars) == 1:  # one bar throughout: draw it (a changed bar would mislead as a line)
        (bar,) = bars
        xs = [float(x) for x, _ in looked]
        series.append(svg.Series(f"fires at {bar:g}", xs, [bar] * len(xs)))
    top = max([y for s in series for y in s.y if math.isfinite(y)], default=1.0)
    return Chart(
        "drift",
        "Drift (PSI) at each round's trigger",
        svg.lines(
            series,
            x_label="round",
            y_label="PSI",
            y_range=(0.0, top * 1.1 or 1.0),
            x_ticks=_round_ticks(looked),
        ),
        "Population stability index of each feature, last round's training rows against "
        "traffic since, as the watcher measured it at the look that started the round.",
    )


def audit_chart(rounds: list[RoundView], confidence: float = 0.95) -> Chart | None:
    audited = [(i + 1, r.audit) for i, r in enumerate(rounds) if r.audit is not None]
    if not audited:
        return None
    series = []
    for name, pick in (("champion (pre)", "pre"), ("challenger (post)", "post")):
        xs, ys, lows, highs = [], [], [], []
        for x, a in audited:
            assert a is not None
            mean = float(getattr(a, pick))
            low, high = stats.wilson_interval(mean * a.n_items, a.n_items, confidence)
            xs.append(float(x))
            ys.append(mean)
            lows.append(low)
            highs.append(high)
        series.append(svg.Series(name, xs, ys, lows, highs))
    return Chart(
        "audit",
        "Audit accuracy per round",
        svg.lines(
            series,
            x_label="round",
            y_label="mean item score",
            y_range=(0.0, 1.0),
            x_ticks=_round_ticks(audited),
        ),
        f"Mean item score on the audit part, with the Wilson {confidence:.0%} interval over "
        "items (missing samples count as 0).",
    )


def _round_ticks(points: list[tuple[int, Any]]) -> list[float] | None:
    """A tick at every round number while they fit (else the chart's own 1-2-5 steps)."""
    return [float(x) for x, _ in points] if len(points) <= 20 else None


def budget_text(b: AlphaBudget) -> list[str]:
    """The flywheel's error budget in sentences (`gate.sequence`; the #alpha-budget section)."""
    n = len(b.rounds)
    if b.rule == "none":
        if not b.rounds:
            return [
                f"No sequence rule (gate.sequence): each round is tested at α {b.total:g}, and "
                "nothing bounds the chance of a false promotion over many rounds."
            ]
        return [
            f"No sequence rule (gate.sequence): {n} round{_s(n)} at α {_alphas(b.rounds)} "
            f"each; P(any false promotion) up to 1 − ∏(1 − α_k) = {b.risk():.1%} if none was "
            f"a real improvement (Σ α = {b.spent:.3g} whatever their dependence), and it grows "
            "with every round."
        ]
    if b.rule == "lord":
        promotions = sum(1 for r in b.rounds if r.promoted)
        spent = (
            f"{b.how}: α {b.spent:.4g} spent over {n} round{_s(n)} with {promotions} "
            f"promotion{_s(promotions)}; wealth remaining {b.remaining or 0:.4g} (false "
            f"discovery rate ≤ {b.total:g})."
        )
    else:
        spent = (
            f"{b.how}: α {b.spent:.4g} spent over {n} round{_s(n)}, {b.remaining or 0:.4g} of "
            f"{b.total:g} remaining (P(any false promotion) ≤ {b.spent:.4g} so far, ≤ "
            f"{b.total:g} ever)."
        )
    lines = [spent]
    if b.refusal:
        lines.append(f"The next round would be refused: {b.refusal}")
    else:
        lines.append(
            f"Next: round {b.next_k} of the sequence gets α_{b.next_k} = {b.next_alpha:.3g}."
        )
    if b.before:
        m = len(b.before)
        lines.append(
            f"{m} round{_s(m)} before the rule, outside the budget (α {_alphas(b.before)} each; "
            f"P(any false promotion among them) up to {b.risk():.1%})."
        )
    return lines


def alpha_of(b: AlphaBudget) -> dict[str, str]:
    """Each round's α by its seal (run) id, as the delta table shows it (`α_k 0.0304` in a
    sequence)."""
    inside = {r.seal_id: f"α_{r.k} {r.alpha:.3g}" for r in b.rounds} if b.rule != "none" else {}
    outside = b.rounds if b.rule == "none" else b.before
    return {r.seal_id: f"{r.alpha:g}" for r in outside} | inside


def _alphas(rounds: list[SpentAlpha]) -> str:
    low, high = min(r.alpha for r in rounds), max(r.alpha for r in rounds)
    return f"{low:g}" if low == high else f"{low:g} to {high:g}"


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def wilson(mean: float, n: int) -> tuple[float, float]:
    return stats.wilson_interval(mean * n, n, 0.95)


def _env() -> Any:
    """The dashboard's jinja2 environment: its own templates, then the report's (for
    `report.css`); the report page's settings and number filters, plus `md`."""
    from jinja2 import (
        ChoiceLoader,
        Environment,
        FileSystemLoader,
        StrictUndefined,
        select_autoescape,
    )

    env = Environment(
        loader=ChoiceLoader([FileSystemLoader(TEMPLATES), FileSystemLoader(REPORT_TEMPLATES)]),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(NUMBER_FILTERS, md=inline_markdown)
    return env


def render_dashboard(d: Dashboard) -> str:
    """The dashboard's HTML text."""
    from markupsafe import Markup

    charts = [
        c for c in (forest_chart(d.rounds), drift_chart(d.rounds), audit_chart(d.rounds)) if c
    ]
    env = _env()
    counts: dict[str, int] = {}
    for r in d.rounds:
        counts[r.decision_text] = counts.get(r.decision_text, 0) + 1
    return str(
        env.get_template(TEMPLATE).render(
            d=d,
            items=timeline(d),
            charts=charts,
            svgs=[Markup(c.svg) for c in charts],  # svg.py escapes the text it places
            counts=counts,
            champion=d.champions[-1] if d.champions else None,
            features=sorted({f for r in d.rounds if r.look for f in r.look.drift}),
            wilson=wilson,
            iso=iso,
            budget=budget_text(d.budget),
            alpha_of=alpha_of(d.budget),
        )
    )
