"""What `tuneloop compose` shows of a composition: frontier.svg and the rows of its table.

`frontier_svg` draws a `CompositionRecord` as a self-contained SVG: cost per item on x,
accuracy on y, the frontier as a step line (read at a budget x, the best accuracy any setting
costing at most x reaches), each tier alone as a labelled square, the chosen setting ringed
with its thresholds, and the objective's line: the budget (max_accuracy_under_cost) or the
best single tier's accuracy less ε (min_cost_non_inferior). `shown_rows` picks the frontier
rows the printed table keeps.

It is drawn the way report.html draws its charts (`report/svg.py`: hand-written markup, the
same classes, colours and 1-2-5 ticks), not with matplotlib, so the same record gives the same
bytes and the file is a few kilobytes. Deliberate differences: a phase imports no other
phase, so the few lines of tick arithmetic are repeated here rather than imported from
`report`; and the file stands alone (opened directly, not inlined in a page), so it declares
the SVG namespace and carries the page's chart styles in its own `<style>`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from typing import TYPE_CHECKING

from tuneloop.axes import nice_ticks
from tuneloop.records.cascade_table import thresholds_text

if TYPE_CHECKING:
    from tuneloop.records.composition import CompositionRecord, Point

WIDTH, HEIGHT = 640, 400
LEFT, RIGHT, TOP, BOTTOM = 64, 24, 48, 40
X0, X1, Y0, Y1 = LEFT, WIDTH - RIGHT, HEIGHT - BOTTOM, TOP
CHAR = 6.2
"""Roughly the width of one 11px character, to keep labels inside the plot."""
FRONTIER, TIER, CHOSEN = "#1f77b4", "#57606a", "#d62728"
STYLE = (
    "text{font:11px system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;fill:#1f2328}"
    ".grid{stroke:#eaeef2}"
    ".zero{stroke:#57606a;stroke-dasharray:4 3}"
    ".label{text-anchor:end}"
    ".tick,.axis{text-anchor:middle;fill:#57606a}"
    ".title{font-size:13px;font-weight:bold}"
    ".sub{fill:#57606a}"
    ".pick{fill:#d62728;font-weight:bold}"
    # a white outline under a label keeps it legible where it crosses a line
    ".halo{paint-order:stroke;stroke:#fff;stroke-width:3px;stroke-linejoin:round}"
)


@dataclass(frozen=True)
class _Axes:
    """Data to pixels: cost from 0 to `xhi` on x, accuracy from `ylo` to `yhi` on y."""

    xhi: float
    ylo: float
    yhi: float

    def x(self, cost: float) -> float:
        return X0 + cost / self.xhi * (X1 - X0)

    def y(self, accuracy: float) -> float:
        return Y0 - (accuracy - self.ylo) / (self.yhi - self.ylo) * (Y0 - Y1)


def frontier_svg(record: CompositionRecord) -> str:
    """The record's frontier, tiers, choice and objective line as one SVG document (module
    docstring); the same record gives the same string."""
    budget = record.budget if record.objective == "max_accuracy_under_cost" else None
    floor = _floor(record)
    costs = [p.cost for p in record.frontier] + [t.cost for t in record.tiers]
    accs = [p.accuracy for p in record.frontier] + [t.accuracy for t in record.tiers]
    costs += [] if budget is None else [budget]
    accs += [] if floor is None else [max(floor[0], 0.0)]
    pad = max((max(accs, default=1.0) - min(accs, default=0.0)) * 0.08, 0.01)
    ax = _Axes(
        xhi=max(costs, default=0.0) * 1.08 or 1.0,
        ylo=max(0.0, min(accs, default=0.0) - pad),
        yhi=min(1.0, max(accs, default=1.0) + pad),
    )
    out = _frame(record, ax)
    labels = _Labels()
    if budget is not None:
        x = ax.x(budget)
        out.append(f'<line x1="{_n(x)}" x2="{_n(x)}" y1="{Y1}" y2="{Y0}" class="zero budget"/>')
        labels.taken.append((x - 1, Y1, x + 1, Y0))
    if floor is not None:
        y = ax.y(max(floor[0], 0.0))  # below 0 (ε ≥ the best accuracy) every setting is in
        out.append(f'<line x1="{X0}" x2="{X1}" y1="{_n(y)}" y2="{_n(y)}" class="zero floor"/>')
        labels.taken.append((X0, y - 1, X1, y + 1))
    out += _frontier(record.frontier, ax, labels)
    tiers = [(ax.x(t.cost), ax.y(t.accuracy), t) for t in record.tiers]
    for x, y, t in tiers:
        tip = f"{t.name} alone: {t.accuracy:.1%} at ${t.cost:.3g} per item"
        out.append(
            f'<rect class="tier" x="{_n(x - 4)}" y="{_n(y - 4)}" width="8" height="8" '
            f'fill="none" stroke="{TIER}" stroke-width="1.5"><title>{escape(tip)}</title></rect>'
        )
        labels.taken.append((x - 5, y - 5, x + 5, y + 5))
    # labels after every mark, so that each avoids them all; the choice first, it matters most
    out.append(_chosen(record.chosen, ax, labels))
    for x, y, t in tiers:
        spots = [(x + 8, y + 15, "start"), (x - 8, y + 15, "end"), (x - 8, y - 8, "end")]
        spots += [(x + 8, y - 8, "start"), (x + 9, y + 4, "start"), (x - 9, y + 4, "end")]
        out.append(labels.place(f"{t.name} alone", spots, "tier-label"))
    if budget is not None:
        x, text = ax.x(budget), f"budget ${budget:.3g} per item"
        spots = [(x - 4, Y1 + 12, "end"), (x + 4, Y1 + 12, "start")]
        out.append(labels.place(text, spots + [(x + 4, Y0 - 6, "start")], "budget-label"))
    if floor is not None:
        y = ax.y(max(floor[0], 0.0))
        spots = [(X0 + 4, y + 14, "start"), (X0 + 4, y - 5, "start"), (X1 - 4, y + 14, "end")]
        out.append(labels.place(floor[1], spots + [(X1 - 4, y - 5, "end")], "floor-label"))
    return "".join([*out, "</svg>\n"])


def _frame(record: CompositionRecord, ax: _Axes) -> list[str]:
    """The document's head, title, objective, grid, ticks and axis labels."""
    title = f"Cascade accuracy/cost frontier: {' → '.join(t.name for t in record.tiers)}"
    sub = f"{record.n_items} items, hand-off on {record.signal}; objective: " + (
        f"most accurate at ≤ ${record.budget:.3g} per item"
        if record.objective == "max_accuracy_under_cost"
        else f"cheapest within ε {record.epsilon:g} of the best tier alone"
    )
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title><style>{STYLE}</style>",
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>',
        f'<text x="{X0}" y="18" class="title">{escape(title)}</text>',
        f'<text x="{X0}" y="34" class="sub">{escape(sub)}</text>',
    ]
    for t in nice_ticks(ax.ylo * 100, ax.yhi * 100):
        y = ax.y(t / 100)
        out.append(f'<line x1="{X0}" x2="{X1}" y1="{_n(y)}" y2="{_n(y)}" class="grid"/>')
        out.append(f'<text x="{X0 - 6}" y="{_n(y + 4)}" class="label">{t:.3g}%</text>')
    ticks = nice_ticks(0.0, ax.xhi, 6)
    for t in ticks:
        x = _n(ax.x(t))
        out.append(f'<line x1="{x}" x2="{x}" y1="{Y1}" y2="{Y0}" class="grid"/>')
        out.append(f'<text x="{x}" y="{Y0 + 14}" class="tick">{_money(t, ticks)}</text>')
    middle = (Y0 + Y1) / 2
    out += [
        f'<line x1="{X0}" x2="{X1}" y1="{Y0}" y2="{Y0}" stroke="#57606a"/>',
        f'<text x="{(X0 + X1) / 2}" y="{HEIGHT - 6}" class="axis">'
        "cost per item ($, mean over items)</text>",
        f'<text x="14" y="{middle}" class="axis" transform="rotate(-90 14 {middle})">'
        "accuracy (mean item score)</text>",
    ]
    return out


def shown_rows(n: int, chosen: int | None, limit: int = 15) -> list[int]:
    """Indices of the frontier rows a table of at most `limit` rows keeps: both ends, the
    chosen row, and the rest evenly spaced between."""
    if n <= limit:
        return list(range(n))
    picks = [round(k * (n - 1) / (limit - 1)) for k in range(limit)]
    if chosen is not None and chosen not in picks:
        # give the chosen row the slot of its nearest inner neighbour; the ends stay
        near = min(range(1, limit - 1), key=lambda k: (abs(picks[k] - chosen), k))
        picks[near] = chosen
    return sorted(set(picks))


def _frontier(front: Sequence[Point], ax: _Axes, labels: _Labels) -> list[str]:
    if not front:
        return []
    # a step after each point: at a budget between two settings' costs, the cheaper one is the
    # best reachable
    xy = [(ax.x(p.cost), ax.y(p.accuracy)) for p in front]
    steps = [xy[0]]
    for (_, ya), (xb, yb) in zip(xy, xy[1:], strict=False):
        steps += [(xb, ya), (xb, yb)]
    for (xa, ya), (xb, yb) in zip(steps, steps[1:], strict=False):
        labels.taken.append((min(xa, xb) - 1, min(ya, yb) - 1, max(xa, xb) + 1, max(ya, yb) + 1))
    out = [
        f'<polyline class="frontier" points="{" ".join(f"{_n(x)},{_n(y)}" for x, y in steps)}" '
        f'fill="none" stroke="{FRONTIER}" stroke-width="2"><title>frontier</title></polyline>'
    ]
    for p, (x, y) in zip(front, xy, strict=True):
        tip = (
            f"thresholds {thresholds_text(p.thresholds)}: {p.accuracy:.1%} at "
            f"${p.cost:.3g} per item; answered " + " / ".join(f"{c:.0%}" for c in p.coverage)
        )
        out.append(
            f'<circle class="point" cx="{_n(x)}" cy="{_n(y)}" r="3" fill="{FRONTIER}">'
            f"<title>{escape(tip)}</title></circle>"
        )
        labels.taken.append((x - 4, y - 4, x + 4, y + 4))
    return out


def _chosen(chosen: Point | None, ax: _Axes, labels: _Labels) -> str:
    if chosen is None:
        spots: list[Spot] = [(X1 - 4, Y1 + 12, "end"), (X0 + 4, Y1 + 12, "start")]
        return labels.place("nothing chosen: no setting meets the objective", spots, "pick")
    x, y = ax.x(chosen.cost), ax.y(chosen.accuracy)
    text = (
        f"chosen: thresholds {thresholds_text(chosen.thresholds)} → {chosen.accuracy:.1%}, "
        f"${chosen.cost:.3g} per item"
    )
    # up and left of a frontier point is empty (nothing cheaper is as accurate), and so is
    # down and right (everything dearer is more accurate)
    spots = [(x - 10, y - 10, "end"), (x + 10, y + 18, "start"), (x - 10, y + 18, "end")]
    label = labels.place(text, [*spots, (x + 10, y - 10, "start")], "pick", bold=True)
    return (
        f'<g class="chosen"><circle cx="{_n(x)}" cy="{_n(y)}" r="7" fill="none" '
        f'stroke="{CHOSEN}" stroke-width="2"/>{label}</g>'
    )


Box = tuple[float, float, float, float]
"""left, top, right, bottom in pixels."""


Spot = tuple[float, float, str]
"""Where a label may go: x, baseline y, text-anchor (start: it runs right of x)."""


@dataclass
class _Labels:
    """Places labels where they cover the fewest marks and labels already placed: the first
    free spot of those offered, else the least covered inside the plot (ties: the first)."""

    taken: list[Box] = field(default_factory=list)

    def place(self, text: str, spots: Sequence[Spot], cls: str, *, bold: bool = False) -> str:
        width = len(text) * (CHAR * 1.1 if bold else CHAR)
        best: tuple[int, Spot, Box] | None = None
        for spot in spots:
            x, y, anchor = spot
            left = x - width if anchor == "end" else x
            box = (left, y - 9, left + width, y + 3)
            inside = box[0] >= X0 and box[2] <= X1 and box[1] >= Y1 - 12 and box[3] <= Y0
            hits = sum(_overlap(box, t) for t in self.taken) + (0 if inside else 1000)
            if best is None or hits < best[0]:
                best = (hits, spot, box)
            if hits == 0:
                break
        assert best is not None, "a label needs somewhere to go"
        _, (x, y, anchor), box = best
        self.taken.append(box)
        return (
            f'<text x="{_n(x)}" y="{_n(y)}" text-anchor="{anchor}" class="halo {cls}">'
            f"{escape(text)}</text>"
        )


def _overlap(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _floor(record: CompositionRecord) -> tuple[float, str] | None:
    """The accuracy min_cost_non_inferior must reach, with its label."""
    if record.objective != "min_cost_non_inferior" or not record.tiers:
        return None
    best = max(record.tiers, key=lambda t: (t.accuracy, -t.cost))  # as compose chooses it
    value = best.accuracy - record.epsilon
    return value, f"{best.name} alone {best.accuracy:.1%} − ε {record.epsilon:g} = {value:.1%}"


def _n(x: float) -> str:
    return f"{x:.1f}"


def _money(v: float, ticks: Sequence[float]) -> str:
    """A tick in plain decimals, as many as the tick step needs (0.00002, not 2e-05)."""
    step = ticks[1] - ticks[0] if len(ticks) > 1 else abs(v) or 1.0
    places = max(0, -math.floor(math.log10(step) + 1e-9))
    return f"{v:.{places}f}"
