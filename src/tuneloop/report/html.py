"""report.html: one self-contained page per run (or per `tuneloop compare --html`).

    tuneloop run loop.yaml                       # the capstone writes capstone/report.html
    tuneloop compare PRE POST --out DIR --html DIR/report.html

The page opens from disk with no network: CSS and the (vanilla) script that sorts and filters
the flips table are inlined, the charts are inline SVG drawn by `report/svg.py`, and nothing
references a URL, a font or a CDN. It is rendered by jinja2 with autoescaping on for every
value, so model output, prompts and tag names are text, never markup (a completion containing
`<script>` shows as those characters); the only values marked safe are the SVG charts, whose
text `svg.py` escapes itself. What it shows is gathered in `report/page.py`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tuneloop.config import LoopConfig
from tuneloop.records import atomic_write_text
from tuneloop.records.run import RunView
from tuneloop.report.inputs import CapstoneInputs, VerdictView
from tuneloop.report.page import Page, bar_json, compare_page, run_page
from tuneloop.report.record import DeltaReport
from tuneloop.report.templating import NUMBER_FILTERS, TEMPLATES

HTML_FILE = "report.html"


def _code(text: str | None) -> Any:
    """Plain text with `backticked` spans set as code: escaped first, so still only text."""
    from markupsafe import Markup, escape

    return Markup(re.sub(r"`([^`]+)`", r"<code>\1</code>", str(escape(text or ""))))


def _env() -> Any:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(NUMBER_FILTERS, code=_code, bar_json=bar_json)
    return env


def render_html(page: Page) -> str:
    """The page's HTML text."""
    from markupsafe import Markup

    charts = [Markup(c.svg) for c in page.charts]  # svg.py escapes the text it places
    training = [Markup(c.svg) for c in page.training]
    grpo = [Markup(c.svg) for c in page.grpo.charts] if page.grpo is not None else []
    template = _env().get_template("report.html.j2")
    return str(template.render(page=page, charts=charts, training=training, grpo=grpo))


def write_run_html(
    out: Path, cfg: LoopConfig, run: RunView, inputs: CapstoneInputs, verdict: VerdictView | None
) -> None:
    """The capstone's report.html, written atomically to `out`."""
    atomic_write_text(out, render_html(run_page(cfg, run, inputs, verdict)))


def write_compare_html(out: Path, report: DeltaReport, pre_log: Path, post_log: Path) -> None:
    """`tuneloop compare --html`: the comparison's report.html, written atomically to `out`."""
    atomic_write_text(out, render_html(compare_page(report, pre_log, post_log)))
