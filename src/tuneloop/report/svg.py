"""Small inline SVG charts for report.html: a forest plot and line charts with bands.

Pure functions from numbers to SVG markup, so the page needs no plotting library, no image
files and no network; a chart is a few kilobytes. Every piece of text placed in the markup
(tag names, series names) goes through `html.escape`: the caller may mark the result safe.
matplotlib (report/figures.py) still draws the PNGs of delta.md; these are drawn here instead
because matplotlib's SVG output is ~10x larger and embeds glyph paths for every label.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from tuneloop.axes import nice_ticks

WIDTH = 640
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd")


@dataclass(frozen=True)
class ForestRow:
    """One estimate with its interval (a row of the forest plot)."""

    label: str
    estimate: float
    low: float
    high: float
    bold: bool = False


@dataclass(frozen=True)
class Series:
    """One line of a line chart; `low`/`high` draw a band around it when given."""

    name: str
    x: Sequence[float]
    y: Sequence[float]
    low: Sequence[float] | None = None
    high: Sequence[float] | None = None


@dataclass(frozen=True)
class Mark:
    """A dashed vertical line at `x` with a short label (e.g. the step a run walked back to)."""

    x: float
    label: str


def _n(x: float) -> str:
    return f"{x:.1f}"


def _fmt(v: float) -> str:
    return f"{v:.3g}"


def forest(rows: Sequence[ForestRow], *, unit: float = 100.0, axis: str = "Δ (points)") -> str:
    """Horizontal intervals on a shared axis with a line at zero; values scaled by `unit`."""
    label_w, row_h, top, bottom = 190, 24, 10, 36
    height = top + row_h * len(rows) + bottom
    lo = min([0.0, *(r.low for r in rows)]) * unit
    hi = max([0.0, *(r.high for r in rows)]) * unit
    pad = (hi - lo) * 0.05 or 1.0
    lo, hi = lo - pad, hi + pad
    x0, x1 = label_w, WIDTH - 20

    def sx(v: float) -> float:
        return x0 + (v * unit - lo) / (hi - lo) * (x1 - x0)

    out = [_open(height, "forest plot of paired Δ with intervals")]
    for t in nice_ticks(lo, hi):
        x = x0 + (t - lo) / (hi - lo) * (x1 - x0)
        out.append(
            f'<line x1="{_n(x)}" x2="{_n(x)}" y1="{top}" y2="{height - bottom}" class="grid"/>'
        )
        out.append(f'<text x="{_n(x)}" y="{height - bottom + 14}" class="tick">{_fmt(t)}</text>')
    out.append(
        f'<line x1="{_n(sx(0))}" x2="{_n(sx(0))}" y1="{top}" y2="{height - bottom}" class="zero"/>'
    )
    for i, r in enumerate(rows):
        y = top + row_h * i + row_h / 2
        weight = ' font-weight="bold"' if r.bold else ""
        tip = f"{r.label}: {r.estimate * unit:+.2f} [{r.low * unit:+.2f}, {r.high * unit:+.2f}]"
        out += [
            f"<g><title>{escape(tip)}</title>",
            f'<text x="{label_w - 8}" y="{_n(y + 4)}" class="label"{weight}>'
            f"{escape(r.label)}</text>",
            f'<line x1="{_n(sx(r.low))}" x2="{_n(sx(r.high))}" y1="{_n(y)}" y2="{_n(y)}" '
            'class="ci"/>',
            f'<rect x="{_n(sx(r.estimate) - 4)}" y="{_n(y - 4)}" width="8" height="8" '
            f'class="{"est bold" if r.bold else "est"}"/></g>',
        ]
    out.append(f'<text x="{(x0 + x1) / 2}" y="{height - 4}" class="axis">{escape(axis)}</text>')
    return "".join([*out, "</svg>"])


def lines(
    series: Sequence[Series],
    *,
    x_label: str,
    y_label: str,
    y_range: tuple[float, float] | None = None,
    height: int = 240,
    x_ticks: Sequence[float] | None = None,
    width: int = WIDTH,
    marks: Sequence[Mark] = (),
) -> str:
    """A line chart of one or more series sharing the axes, with optional bands and legend;
    `x_ticks` places the x-axis ticks (default: round 1-2-5 steps); a smaller `width` draws a
    small multiple at the same text size; `marks` are vertical lines inside the x range."""
    left, right, top, bottom = 64, 20, 24, 36
    xs = [x for s in series for x in s.x]
    ys = [y for s in series for y in (*s.y, *(s.low or ()), *(s.high or ())) if math.isfinite(y)]
    if not xs or not ys:
        return ""
    xlo, xhi = min(xs), max(xs)
    if xhi == xlo:
        xlo, xhi = xlo - 1, xhi + 1
    ylo, yhi = y_range if y_range is not None else (min(ys), max(ys))
    if yhi == ylo:
        ylo, yhi = ylo - 1, yhi + 1
    x0, x1, y0, y1 = left, width - right, height - bottom, top

    def px(x: float) -> float:
        return x0 + (x - xlo) / (xhi - xlo) * (x1 - x0)

    def py(y: float) -> float:
        return y0 - (y - ylo) / (yhi - ylo) * (y0 - y1)

    out = [_open(height, f"{y_label} against {x_label}", width)]
    for t in nice_ticks(ylo, yhi):
        out.append(f'<line x1="{x0}" x2="{x1}" y1="{_n(py(t))}" y2="{_n(py(t))}" class="grid"/>')
        out.append(f'<text x="{x0 - 6}" y="{_n(py(t) + 4)}" class="label">{_fmt(t)}</text>')
    for t in x_ticks if x_ticks is not None else nice_ticks(xlo, xhi, 8 if width >= WIDTH else 4):
        out.append(f'<text x="{_n(px(t))}" y="{y0 + 14}" class="tick">{_fmt(t)}</text>')
    for m in marks:
        if xlo <= m.x <= xhi:
            x = _n(px(m.x))
            out.append(
                f"<g><title>{escape(m.label)}</title>"
                f'<line x1="{x}" x2="{x}" y1="{y1}" y2="{y0}" class="zero"/>'
                f'<text x="{x}" y="{y1 - 4}" class="tick">{escape(m.label)}</text></g>'
            )
    for i, s in enumerate(series):
        color = COLORS[i % len(COLORS)]
        pts = [(px(x), py(y)) for x, y in zip(s.x, s.y, strict=True) if math.isfinite(y)]
        if s.low is not None and s.high is not None:
            upper = [f"{_n(px(x))},{_n(py(h))}" for x, h in zip(s.x, s.high, strict=True)]
            lower = [f"{_n(px(x))},{_n(py(lo))}" for x, lo in zip(s.x, s.low, strict=True)]
            out.append(
                f'<polygon points="{" ".join(upper + lower[::-1])}" fill="{color}" opacity="0.18"/>'
            )
        path = " ".join(f"{_n(x)},{_n(y)}" for x, y in pts)
        out.append(
            f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2">'
            f"<title>{escape(s.name)}</title></polyline>"
        )
        if len(pts) <= 40:
            out += [f'<circle cx="{_n(x)}" cy="{_n(y)}" r="2.5" fill="{color}"/>' for x, y in pts]
        if len(series) > 1:
            lx = x0 + 10 + 110 * i
            out.append(
                f'<rect x="{lx}" y="6" width="12" height="4" fill="{color}"/>'
                f'<text x="{lx + 16}" y="12" class="legend">{escape(s.name)}</text>'
            )
    out.append(f'<text x="{(x0 + x1) / 2}" y="{height - 4}" class="axis">{escape(x_label)}</text>')
    out.append(
        f'<text x="12" y="{(y0 + y1) / 2}" class="axis" '
        f'transform="rotate(-90 12 {(y0 + y1) / 2})">{escape(y_label)}</text>'
    )
    return "".join([*out, "</svg>"])


def _open(height: int, label: str, width: int = WIDTH) -> str:
    return (
        f'<svg viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{escape(label)}">'
    )
