"""What report.html and the flywheel's dashboard (`tuneloop view`) share in their templates.

- `TEMPLATES`: the report's templates folder, packaged with the wheel; its `report.css` is the
  stylesheet both pages inline;
- `NUMBER_FILTERS`: the jinja2 filters that format numbers the same way on both pages
  (`pct` 12.3%, `pp` +1.2 points, `p` a p-value to 3 significant digits, `seconds` 12.3).

Each page builds its own jinja2 environment (`report/html.py`, `view/page.py`) from these.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

TEMPLATES = Path(__file__).parent / "templates"


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def pp(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:+.1f}"


def p_value(p: float | None) -> str:
    if p is None:
        return "n/a"
    return f"{p:.3g}" if p >= 1e-4 else f"{p:.2e}"


def seconds(s: float | None) -> str:
    return "—" if s is None else f"{s:.1f}"


NUMBER_FILTERS: dict[str, Callable[[Any], str]] = {
    "pct": pct,
    "pp": pp,
    "p": p_value,
    "seconds": seconds,
}
