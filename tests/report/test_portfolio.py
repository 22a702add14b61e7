"""A portfolio round's challengers in the capstone: report.md's table and report.html's section,
read from `challengers/selection.json` (tests/portfolio_fixture.py) of a real round on fake
model phases (tests/loop/fakeloop.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from markupsafe import escape

from tuneloop.config import load_config
from tuneloop.gate.verdict_record import GateVerdict
from tuneloop.loop.handover import capstone_inputs
from tuneloop.loop.layout import RunLayout
from tuneloop.loop.state import RunState
from tuneloop.records import read_record
from tuneloop.report.capstone import render_capstone
from tuneloop.report.html import render_html
from tuneloop.report.page import run_page

from ..loop.fakeloop import runner, write_config
from ..portfolio_fixture import DEFAULT, FAILED, REASON, SELECTED, write_portfolio


@pytest.fixture(scope="module")
def round_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("portfolio_round")
    runner(write_config(tmp)).run()
    return tmp


def _pages(tmp: Path) -> tuple[str, str]:
    """report.md and report.html of the round, rendered from its artifacts as they are now."""
    cfg = load_config(tmp / "loop.yaml")
    run = RunLayout(cfg.workdir)
    state = read_record(run.state, RunState)
    verdict = read_record(run.verdict, GateVerdict)
    inputs = capstone_inputs(cfg, run, state)
    md = render_capstone(cfg, state, inputs, verdict, run.capstone / "report.md")
    return md, render_html(run_page(cfg, state, inputs, verdict))


def test_a_round_without_a_portfolio_has_no_challengers_section(round_dir: Path) -> None:
    cfg = load_config(round_dir / "loop.yaml")
    assert not RunLayout(cfg.workdir).portfolio_record.exists()
    md, html = _pages(round_dir)
    assert "Challengers" not in md and 'id="challengers"' not in html


def test_the_capstone_shows_the_challenger_table(round_dir: Path, tmp_path: Path) -> None:
    cfg = load_config(round_dir / "loop.yaml")
    path = write_portfolio(RunLayout(cfg.workdir).portfolio_record)
    try:
        md, html = _pages(round_dir)
    finally:
        path.unlink()
    lines = md.splitlines()
    # report.md: before the gate, the rule line, one row per challenger, the choice
    at = lines.index("## Challengers")
    assert at < lines.index("## Gate")
    assert lines[at + 2].startswith("- Rule `default_stays` (sha256 c0ffee000000")
    assert f"- Record: `{path}`" in lines
    rows = [line for line in lines[at:] if line.startswith("| `") or line.startswith("| **")]
    assert len(rows) == 3
    assert rows[0].startswith(f"| `{DEFAULT}` (default) | learning_rate=0.001 |")
    assert rows[1].startswith(f"| **`{SELECTED}`** |")  # the selected one stands out
    assert "| ✓ beats the default" in rows[1]
    assert "| failed: train: CUDA out of memory \\|" in rows[2]
    assert f"Rule `default_stays` selected `{SELECTED}` of 3 challengers" in md
    assert REASON in md
    # report.html: the section, linked, the selected row highlighted and the failed one marked
    assert '<a href="#challengers">Challengers</a>' in html
    assert '<section id="challengers">' in html
    section = html[html.index('<section id="challengers">') :]
    section = section[: section.index("</section>")]
    assert f'<tr class="selected" data-challenger="{SELECTED}">' in section
    assert f'<tr class=" failed" data-challenger="{FAILED}">' in section
    assert f"<td><code>{DEFAULT}</code> (default)</td>" in section
    assert str(escape(REASON)) in section
    assert "failed: train: CUDA out of memory |" in section  # unescaped in HTML
    # the bars: the two that finished, and the default's mean marked on every row
    widths = re.findall(r'class="bar" style="width: ([\d.]+)px"', section)
    assert widths == ["186.0", "210.0"]
    assert section.count('class="mark" style="left: 186.0px"') == 3


def test_a_missing_record_is_said(round_dir: Path) -> None:
    import dataclasses

    from tuneloop.report.page import portfolio_section

    cfg = load_config(round_dir / "loop.yaml")
    run = RunLayout(cfg.workdir)
    section = portfolio_section(run.portfolio_record)
    assert section is not None and section.note is not None
    assert section.note.startswith("not measured")
    state = read_record(run.state, RunState)
    inputs = dataclasses.replace(capstone_inputs(cfg, run, state), portfolio=run.portfolio_record)
    md = render_capstone(cfg, state, inputs, None, run.capstone / "report.md")
    assert f"## Challengers\n\nnot measured (no `{run.portfolio_record}`)" in md
