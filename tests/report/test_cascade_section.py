"""A cascade round's section in the capstone: report.md's `## Cascade` and report.html's
`#cascade`, read from the compose phase's composition.json and frontier.svg and from the arms'
sample logs (tests/cascade_fixture.py), on a real round of fake model phases
(tests/loop/fakeloop.py) whose logs are rewritten as a cascade's."""

from __future__ import annotations

import base64
import dataclasses
import re
import shutil
from pathlib import Path

import pytest
from markupsafe import escape

from tuneloop.config import LoopConfig, load_config
from tuneloop.gate.verdict_record import ConditionResult, GateVerdict
from tuneloop.loop.handover import capstone_inputs
from tuneloop.loop.layout import RunLayout
from tuneloop.loop.state import RunState
from tuneloop.records import read_record
from tuneloop.report import CapstoneInputs, CascadeInputs
from tuneloop.report.capstone import render_capstone
from tuneloop.report.html import render_html
from tuneloop.report.page import run_page

from ..cascade_fixture import REASON, make_cascade_round
from ..loop.fakeloop import runner, write_config

COST = ConditionResult(
    name="cost:max_usd_per_item",
    passed=True,
    detail="cost: challenger 1.08e-05 USD per item (≤ max_usd_per_item 2e-05; champion 4e-05 USD, "
    "111 items)",
)


@pytest.fixture(scope="module")
def round_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("cascade_round")
    runner(write_config(tmp)).run()
    return tmp


def _as_cascade_round(cfg: LoopConfig) -> LoopConfig:
    """The config with `serve.challenger: cascade` (the handover reads only that)."""
    return cfg.model_copy(update={"serve": cfg.serve.model_copy(update={"challenger": "cascade"})})


@pytest.fixture
def work(round_dir: Path, tmp_path: Path) -> Path:
    """A copy of the round's workdir as a cascade round left it (tests/cascade_fixture.py)."""
    work = tmp_path / "work"
    shutil.copytree(load_config(round_dir / "loop.yaml").workdir, work)
    make_cascade_round(work)
    return work


def _inputs(round_dir: Path, work: Path) -> tuple[LoopConfig, RunState, CapstoneInputs]:
    cfg = _as_cascade_round(load_config(round_dir / "loop.yaml"))
    state = read_record(work / "state.json", RunState)
    return cfg, state, capstone_inputs(cfg, RunLayout(work), state)


def _pages(round_dir: Path, work: Path, verdict: GateVerdict | None) -> tuple[str, str]:
    cfg, state, inputs = _inputs(round_dir, work)
    md = render_capstone(cfg, state, inputs, verdict, work / "capstone" / "report.md")
    return md, render_html(run_page(cfg, state, inputs, verdict))


def _section(html: str) -> str:
    start = html.index('<section id="cascade">')
    return html[start : html.index("</section>", start)]


def test_a_round_without_a_cascade_has_no_cascade_section(round_dir: Path) -> None:
    cfg = load_config(round_dir / "loop.yaml")
    run = RunLayout(cfg.workdir)
    state = read_record(run.state, RunState)
    verdict = read_record(run.verdict, GateVerdict)
    inputs = capstone_inputs(cfg, run, state)
    assert inputs.cascade is None
    md = render_capstone(cfg, state, inputs, verdict, run.capstone / "report.md")
    html = render_html(run_page(cfg, state, inputs, verdict))
    assert "Cascade" not in md and "frontier" not in md
    assert 'id="cascade"' not in html and "#cascade" not in html
    assert "data:image/svg+xml" not in html


def test_the_handover_names_the_compose_phase_s_artifacts(round_dir: Path, work: Path) -> None:
    _, _, inputs = _inputs(round_dir, work)
    run = RunLayout(work)
    assert inputs.cascade == CascadeInputs(
        run.compose / "composition.json", run.compose / "frontier.svg", run.eval_pre, run.eval_post
    )


def test_report_md_shows_the_composition_the_frontier_and_the_gate_slice(
    round_dir: Path, work: Path
) -> None:
    verdict = read_record(work / "gate" / "verdict.json", GateVerdict)
    verdict = verdict.model_copy(update={"conditions": [*verdict.conditions, COST]})
    n = len(verdict.item_ids)
    assert n == 111  # the fake round's gate slice
    md, _ = _pages(round_dir, work, verdict)
    lines = md.splitlines()
    at = lines.index("## Cascade")
    assert at < lines.index("## Gate")
    section = lines[at : lines.index("## Gate")]
    escaped = REASON.replace("$", "\\$")  # two `$` on a Markdown line would render as math
    assert section == [
        "## Cascade",
        "",
        f"- Record: `{work / 'compose' / 'composition.json'}`",
        "- Objective `max_accuracy_under_cost` (budget 2e-05 USD per item), signal "
        f"`mean_logprob`, on 20 validation items: {escaped}",
        "",
        "Each tier alone on the validation slice:",
        "",
        "| tier | model | USD/1M tokens | accuracy | USD/item |",
        "|---|---|---|---|---|",
        "| `small` | `small-model` | 0.2 | 55.0% | 2e-06 |",
        "| `big` | `big-model` | 4 | 85.0% | 4e-05 |",
        "",
        "- Chosen: thresholds -0.8 (served at -0.9) → 80.0% at 1.4e-05 USD per item; "
        "items answered: `small` 70%, `big` 30%",
        "",
        "![accuracy/cost frontier on the validation slice](../compose/frontier.svg)",
        "",
        "On the gate slice `gate` (111 items), from eval_post's rows:",
        "",
        "| tier | answered | share |",
        "|---|---|---|",
        "| `small` | 78 | 70.3% |",
        "| `big` | 22 | 19.8% |",
        "| no answer | 11 | 9.9% |",
        "",
        "- Mean cost per item: champion (pre) 4e-05 USD (111 items), cascade (post) 1.08e-05 "
        "USD (100 items); 0.27 × the champion's",
        f"- ✓ cost:max_usd_per_item: {COST.detail}",
        "",
    ]
    # the link resolves from where report.md is written
    assert (work / "capstone" / "../compose/frontier.svg").resolve().is_file()


def test_report_html_shows_the_section_with_the_frontier_inline(
    round_dir: Path, work: Path
) -> None:
    verdict = read_record(work / "gate" / "verdict.json", GateVerdict)
    verdict = verdict.model_copy(update={"conditions": [*verdict.conditions, COST]})
    _, html = _pages(round_dir, work, verdict)
    assert '<a href="#cascade">Cascade</a>' in html
    assert html.index('<section id="cascade">') < html.index('<section id="result">')
    section = _section(html)
    assert "<h2>Cascade</h2>" in section
    assert str(escape(REASON)) in section
    assert (
        "<tr><td><code>small</code></td><td><code>small-model</code></td>"
        '<td class="num">0.2</td><td class="num">55.0%</td><td class="num">2e-06</td></tr>'
    ) in section
    assert "thresholds -0.8 (served at -0.9) → 80.0% at 1.4e-05 USD per item" in section
    # the frontier, byte for byte what the compose phase drew, as an image (its own <style>
    # stays inside it)
    uri = re.search(r'<img id="cascade-frontier" src="data:image/svg\+xml;base64,([^"]+)"', section)
    assert uri is not None
    drawn = (work / "compose" / "frontier.svg").read_bytes()
    assert base64.b64decode(uri.group(1)) == drawn
    assert "<svg" not in section and "<style" not in section
    assert '<td><code>small</code></td><td class="num">78</td><td class="num">70.3%</td>' in section
    assert '<td>no answer</td><td class="num">11</td><td class="num">9.9%</td>' in section
    assert "cascade (post) 1.08e-05 USD (100 items)" in section
    assert str(escape(f"✓ cost:max_usd_per_item: {COST.detail}")) in section


def test_without_a_verdict_every_evaluated_item_is_counted(round_dir: Path, work: Path) -> None:
    md, html = _pages(round_dir, work, None)
    assert "On every item eval_post evaluated (240 items; no gate verdict):" in md
    assert "cost:" not in _section(html)


def test_missing_artifacts_are_said(round_dir: Path, work: Path) -> None:
    (work / "compose" / "frontier.svg").unlink()
    verdict = read_record(work / "gate" / "verdict.json", GateVerdict)
    md, html = _pages(round_dir, work, verdict)
    assert "Frontier: not drawn (no `frontier.svg` beside the composition)" in md
    assert "data:image/svg+xml" not in html and "not drawn" in _section(html)
    shutil.rmtree(work / "eval_post")
    md, _ = _pages(round_dir, work, verdict)
    assert f"Gate slice: not measured (no sample log in `{work / 'eval_post'}`)" in md
    (work / "compose" / "composition.json").unlink()
    cfg, state, inputs = _inputs(round_dir, work)
    md = render_capstone(cfg, state, inputs, verdict, work / "capstone" / "report.md")
    assert f"## Cascade\n\nnot measured (no `{work / 'compose' / 'composition.json'}`)\n" in md
    inputs = dataclasses.replace(inputs, cascade=None)
    assert "## Cascade" not in render_capstone(cfg, state, inputs, verdict, work / "r.md")
