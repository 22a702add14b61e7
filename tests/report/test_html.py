"""report.html without a browser: what the capstone and `tuneloop compare --html` write, that
model output is escaped, that every section is there (or says why not), and that the page
references nothing outside itself. tests/report/test_html_browser.py opens it in Chromium."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from markupsafe import escape

from tuneloop.gate.verdict_record import GateVerdict
from tuneloop.records import read_record
from tuneloop.report.record import DeltaReport

from .htmlround import CANARY

SECTIONS = (
    "verdict",
    "result",
    "flips-section",
    "diagnosis",
    "finish",
    "training",
    "grpo",
    "corpus",
    "timings",
    "config",
)


def _html(work: Path) -> str:
    return (work / "capstone" / "report.html").read_text(encoding="utf-8")


def test_the_capstone_writes_report_html_with_every_section(html_round: Path) -> None:
    html = _html(html_round)
    for section in SECTIONS:
        assert f'<section id="{section}">' in html, section
    verdict = read_record(html_round / "gate" / "verdict.json", GateVerdict)
    assert f'<span class="decision">{verdict.decision}</span>' in html
    for c in verdict.conditions:  # each condition of the bar with its figure
        assert f"<td>{c.name}</td><td>{escape(c.detail)}</td>" in html
    delta = read_record(html_round / "report" / "delta.json", DeltaReport)
    flips = delta.flips.wrong_to_right + delta.flips.right_to_wrong
    assert html.count('data-direction="fixed"') == delta.flips.wrong_to_right
    assert html.count('data-direction="broken"') == delta.flips.right_to_wrong > 0
    assert f"{flips} of {flips} rows" in html
    assert "<svg" in html and "loss (67 points)" in html  # forest plot, training curves
    assert (
        "walked back to checkpoint-20 (step 20 of 30): training (grpo) stopped at step 27" in html
    )
    assert "reward mean ± spread (27 points)" in html and '<table id="bands">' in html
    assert "no corpus build in this round" in html  # absent section, said so
    assert "writing this report" in html  # phase timings
    assert re.search(r"Resolved config sha256 <code>[0-9a-f]{64}</code>", html)


def test_model_output_is_escaped(html_round: Path) -> None:
    html = _html(html_round)
    assert CANARY not in html
    assert "&lt;script&gt;window.__xss = 1; alert(1)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=&#34;alert(2)&#34;&gt;" in html
    assert html.count("<script>") == 1  # the page's own script, and only it


def test_the_page_loads_nothing_from_outside(html_round: Path) -> None:
    html = _html(html_round)
    assert "default-src 'none'" in html  # a browser refuses any fetch the page might try
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    assert "@import" not in html and "url(" not in html and "@font-face" not in html


def test_report_html_is_part_of_the_capstone_outputs(html_round: Path) -> None:
    from tuneloop.loop.state import RunState

    state = read_record(html_round / "state.json", RunState)
    assert "capstone/report.html" in state.phases["capstone"].outputs


def test_compare_html_from_the_installed_command(tmp_path: Path, make_log) -> None:
    """Two logs without a run: what is there is shown, the rest says why it is absent."""
    pre = make_log({"a": [0.0, 1.0], "b": [1.0, 1.0], "c": [0.0, 0.0]}, tags={"a": ["x"]})
    post = make_log({"a": [1.0, 1.0], "b": [0.0, 0.0], "c": [0.0, 1.0]}, model="m1")
    exe = Path(sys.executable).parent / "tuneloop"
    out = tmp_path / "out"
    done = subprocess.run(
        [
            str(exe),
            "compare",
            str(pre),
            str(post),
            "--out",
            str(out),
            "--no-figures",
            "--html",
            str(out),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert f"wrote {out / 'report.html'}" in done.stdout
    html = (out / "report.html").read_text(encoding="utf-8")
    assert html.count('data-direction="fixed"') == 1 and html.count('data-direction="broken"') == 1
    assert "prompts not shown: the suite <code>suite.jsonl</code>" in html
    assert "No verdict: not part of <code>tuneloop compare</code>" in html
    assert html.count("not part of <code>tuneloop compare</code>") >= 5  # gate … config
    assert "pass@k (unbiased" in html  # two samples per item: the curve is drawn


def test_compare_html_refuses_an_unwritable_path(tmp_path: Path, make_log) -> None:
    pre = make_log({"a": [1.0]})
    blocker = tmp_path / "file"
    blocker.write_text("")
    exe = Path(sys.executable).parent / "tuneloop"
    done = subprocess.run(
        [
            str(exe),
            "compare",
            str(pre),
            str(pre),
            "--out",
            str(tmp_path / "o"),
            "--html",
            str(blocker / "report.html"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--html" in done.stderr
    assert not (tmp_path / "o" / "delta.json").exists()
