"""report.html in a real browser: headless Chromium driven by Playwright, from disk.

What a person would see: the verdict, one row per flip, a filter and a sort that work, the
XSS canary shown as text with no dialog, no console error and no request leaving the file.
Screenshots go to the test's tmp folder, and to `$TUNELOOP_SCREENSHOTS` when set
(`TUNELOOP_SCREENSHOTS=docs/img` refreshes the README's). The browser is Debian's `chromium`
(or `$TUNELOOP_CHROMIUM`), never a download: `scripts/setup` installs it. Without it these
tests fail, saying how to install it; they do not skip.

The demo's own report (`scripts/demo` → runs/arith/capstone/report.html, or
`$TUNELOOP_DEMO_REPORT`) is checked the same way when it exists.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tuneloop.config import load_config
from tuneloop.gate.verdict_record import GateVerdict
from tuneloop.loop.handover import capstone_inputs
from tuneloop.loop.layout import RunLayout
from tuneloop.loop.state import RunState
from tuneloop.records import read_record
from tuneloop.report.html import write_run_html
from tuneloop.report.record import DeltaReport

from ..cascade_fixture import make_cascade_round
from .htmlround import CANARY

ROOT = Path(__file__).resolve().parents[2]
INSTALL = (
    "run scripts/setup (it installs both), or by hand: `apt-get install -y chromium` "
    "(Debian/Ubuntu) and `.venv/bin/pip install -r requirements.lock`; or set "
    "TUNELOOP_CHROMIUM to a Chromium or Chrome executable"
)
FLAGS = [
    "--no-sandbox",  # root in a container has no user namespace for the sandbox
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium() -> str:
    """The Chromium executable, or a test failure naming how to install it."""
    wanted = os.environ.get("TUNELOOP_CHROMIUM")
    for name in [wanted] if wanted else ["chromium", "chromium-browser", "google-chrome"]:
        found = shutil.which(name)
        if found:
            return found
    pytest.fail(f"headless Chromium not found ({wanted or 'chromium'}); {INSTALL}", False)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail(f"the Python package playwright is not installed; {INSTALL}", False)
    exe = chromium()
    with sync_playwright() as p, tempfile.TemporaryDirectory() as profile:
        context = p.chromium.launch_persistent_context(
            profile,  # a fresh --user-data-dir
            executable_path=exe,
            headless=True,
            args=FLAGS,
            viewport={"width": 1280, "height": 900},
        )
        yield context
        context.close()


class Seen:
    """A page opened from disk, with everything it said and tried."""

    def __init__(self, context: Any, path: Path | str) -> None:
        """Open `path` (a file) or a URL (`str`, e.g. a served page)."""
        self.problems: list[str] = []
        self.dialogs: list[str] = []
        self.requests: list[str] = []
        self.page = context.new_page()
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        self.page.on("dialog", self._dialog)
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(path if isinstance(path, str) else path.resolve().as_uri())
        self.page.wait_for_load_state("load")

    def _console(self, msg: Any) -> None:
        if msg.type in ("error", "warning"):
            self.problems.append(f"console {msg.type}: {msg.text}")

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def visible_rows(self) -> Any:
        return self.page.locator("#flips tbody tr:visible")

    def shoot(
        self, name: str, tmp: Path, selector: str | None = None, *, readme: bool = False
    ) -> Path:
        """A screenshot into `tmp`; the README's also into $TUNELOOP_SCREENSHOTS when set."""
        out = tmp / name
        if selector is None:
            self.page.screenshot(path=str(out), full_page=True)
        else:
            self.page.locator(selector).screenshot(path=str(out))
        extra = os.environ.get("TUNELOOP_SCREENSHOTS")
        if extra and readme:
            Path(extra).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(out, Path(extra) / name)
        return out


def check_what_a_person_sees(seen: Seen, work: Path) -> None:
    """The checks that hold for any run's report.html."""
    page = seen.page
    verdict = read_record(work / "gate" / "verdict.json", GateVerdict)
    assert page.inner_text("#verdict .decision") == verdict.decision.upper()  # CSS uppercases
    delta = read_record(work / "report" / "delta.json", DeltaReport)
    flips = delta.flips.wrong_to_right + delta.flips.right_to_wrong
    assert seen.visible_rows().count() == flips
    assert page.inner_text("#flip-count") == f"{flips} of {flips} rows"
    assert page.locator("#conditions tbody tr").count() == len(verdict.conditions)
    assert page.locator("#result svg").count() >= 1  # the forest plot
    if flips:
        page.select_option("#flip-direction", "broken")
        assert seen.visible_rows().count() == delta.flips.right_to_wrong
        page.select_option("#flip-direction", "")
    file_only = [u for u in seen.requests if not u.startswith(("file:", "data:", "about:"))]
    assert not file_only, f"the page asked the network for {file_only}"
    assert not seen.problems, seen.problems
    assert not seen.dialogs, f"a dialog fired: {seen.dialogs}"


@pytest.fixture(scope="module")
def seen(browser: Any, html_round: Path) -> Seen:
    return Seen(browser, html_round / "capstone" / "report.html")


def test_the_verdict_flips_and_sections_as_seen(seen: Seen, html_round: Path) -> None:
    check_what_a_person_sees(seen, html_round)
    for heading in (
        "Verdict",
        "Paired Δ (report slice)",
        "Flips: items fixed and broken",
        "Finish reasons per arm",
        "Training curves",
        "GRPO diagnostics",
        "Corpus funnel",
        "Phases",
        "Config and manifest",
    ):
        assert seen.page.get_by_role("heading", name=heading, exact=True).is_visible(), heading


def test_the_grpo_diagnostics_and_the_walk_back_as_seen(seen: Seen, tmp_path: Path) -> None:
    page = seen.page
    walk = page.locator("#walk-back")
    assert walk.is_visible()
    assert walk.inner_text().startswith("walked back to checkpoint-20 (step 20 of 30): training")
    charts = page.locator("#grpo figure svg")
    assert charts.count() == 5  # no KL: the fake run had no reference model, and says so
    assert page.get_by_text("KL to the reference: not in the log").is_visible()
    first, second = charts.nth(0).bounding_box(), charts.nth(1).bounding_box()
    assert first and second and abs(first["y"] - second["y"]) < 1  # small multiples: one row
    assert first["width"] < 400
    bands = page.locator("#bands tbody tr")
    assert bands.count() == 3
    assert bands.nth(0).inner_text().split("\t")[:2] == ["medium", str(4 * 27 + 14)]
    assert page.locator("nav a[href='#grpo']").is_visible()
    seen.shoot("report-grpo.png", tmp_path, "#grpo", readme=True)
    assert not seen.problems


def test_the_xss_canary_shows_as_text(seen: Seen) -> None:
    page = seen.page
    assert page.get_by_text(CANARY, exact=True).count() == 1  # the characters, on screen
    assert page.evaluate("window.__xss === undefined")
    assert page.locator("#flips img").count() == 0
    assert not seen.dialogs and not seen.problems


def test_typing_in_the_filter_narrows_the_rows(seen: Seen, tmp_path: Path) -> None:
    page = seen.page
    total = seen.visible_rows().count()
    page.fill("#flip-filter", "window.__xss")
    assert seen.visible_rows().count() == 1
    assert page.inner_text("#flip-count") == f"1 of {total} rows"
    seen.shoot("report-flips-filtered.png", tmp_path, "#flips-section", readme=True)
    page.fill("#flip-filter", "no such text anywhere")
    assert seen.visible_rows().count() == 0
    page.fill("#flip-filter", "")
    assert seen.visible_rows().count() == total


def test_clicking_a_header_sorts_the_rows(seen: Seen) -> None:
    page = seen.page

    def column(n: int) -> list[str]:
        return [
            t.strip() for t in page.locator(f"#flips tbody tr td:nth-child({n})").all_inner_texts()
        ]

    page.click("#flips th:nth-child(9)")  # post score, ascending: broken (0.00) first
    post = [float(x) for x in column(9)]
    assert post == sorted(post) and post[0] < post[-1]
    assert page.get_attribute("#flips th:nth-child(9)", "aria-sort") == "ascending"
    page.click("#flips th:nth-child(9)")
    assert [float(x) for x in column(9)] == sorted(post, reverse=True)
    page.click("#flips th:nth-child(1)")
    assert column(1) == sorted(column(1))
    assert not seen.problems


def test_screenshots(seen: Seen, tmp_path: Path) -> None:
    seen.page.fill("#flip-filter", "")
    whole = seen.shoot("report-full.png", tmp_path)
    top = seen.shoot("report-verdict.png", tmp_path, "#verdict")
    assert whole.stat().st_size > 20_000 and top.stat().st_size > 5_000


def test_a_cascade_round_s_section_as_seen(browser: Any, html_round: Path, tmp_path: Path) -> None:
    """The same round as a cascade round (tests/cascade_fixture.py): its section, linked, with
    the compose phase's frontier.svg shown as an image the page's CSP allows."""
    work = tmp_path / "work"
    shutil.copytree(html_round, work)
    make_cascade_round(work)
    cfg = load_config(html_round.parent / "loop.yaml")
    cfg = cfg.model_copy(update={"serve": cfg.serve.model_copy(update={"challenger": "cascade"})})
    state = read_record(work / "state.json", RunState)
    verdict = read_record(work / "gate" / "verdict.json", GateVerdict)
    page_file = work / "capstone" / "report.html"
    write_run_html(page_file, cfg, state, capstone_inputs(cfg, RunLayout(work), state), verdict)
    seen = Seen(browser, page_file)
    check_what_a_person_sees(seen, work)
    page = seen.page
    assert page.get_by_role("heading", name="Cascade", exact=True).is_visible()
    assert page.locator("nav a[href='#cascade']").is_visible()
    frontier = page.locator("#cascade-frontier")
    assert frontier.is_visible()
    assert (
        page.evaluate(
            "() => { const i = document.getElementById('cascade-frontier');"
            " return i.complete && i.naturalWidth; }"
        )
        == 640
    )  # the SVG's own width: it loaded and drew
    assert page.locator("#cascade-tiers tbody tr").count() == 2
    assert page.locator("#cascade-coverage tbody tr").count() == 3  # small, big, no answer
    assert page.inner_text("#cascade-chosen").startswith("Chosen: thresholds -0.8")
    seen.shoot("report-cascade.png", tmp_path, "#cascade")
    assert not seen.problems, seen.problems


def test_the_demo_report_as_seen(browser: Any, tmp_path: Path) -> None:
    path = Path(os.environ.get("TUNELOOP_DEMO_REPORT", ROOT / "runs/arith/capstone/report.html"))
    if not path.exists():
        pytest.skip(f"no demo report at {path}: run scripts/demo first")
    work = path.parent.parent
    seen = Seen(browser, path)
    check_what_a_person_sees(seen, work)
    seen.shoot("demo-report.png", tmp_path)
    for part in ("verdict", "result", "training"):
        seen.shoot(f"demo-{part}.png", tmp_path, f"#{part}", readme=True)
