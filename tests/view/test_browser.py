"""The dashboard in a real browser: headless Chromium driven by Playwright (Debian's `chromium`,
never a download), the bundle opened from disk and the real `tuneloop view --serve` over HTTP.

What a person sees: one timeline entry per round, each decision's words, the current champion,
a run's report.html that opens from its link, the XSS canary (in a round's trigger, and so in
the experiment log) shown as text with no dialog, no console error, and — for the bundle — no
request that is not a file. The browser fixture and `Seen` are report.html's
(tests/report/test_html_browser.py): without Chromium these tests fail saying how to install it.

The real flywheel demo's ledger (`examples/arith/flywheel.yaml` → runs/flywheel, or
`$TUNELOOP_DEMO_FLYWHEEL`) is checked too when it exists, and gives the README's screenshots
(`TUNELOOP_SCREENSHOTS=docs/img` refreshes them).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tuneloop.config import load_config
from tuneloop.gate.ledger import open_ledger
from tuneloop.loop.layout import ledger_path
from tuneloop.view.bundle import write_bundle
from tuneloop.view.history import DECISION_TEXT, gather
from tuneloop.view.sources import resolve

from ..report.htmlround import CANARY
from ..report.test_html_browser import Seen, browser  # noqa: F401  (the fixture)
from .world import DECISIONS

ROOT = Path(__file__).resolve().parents[2]
TUNELOOP = str(Path(sys.executable).with_name("tuneloop"))
DEMO = Path(os.environ.get("TUNELOOP_DEMO_FLYWHEEL", ROOT / "examples/arith/flywheel.yaml"))


def check_dashboard(seen: Seen, decisions: list[str], champion: int) -> None:
    """The checks that hold for any ledger's dashboard."""
    page = seen.page
    assert page.locator("#timeline li.round").count() == len(decisions)
    badges = page.locator("#timeline li.round .badge").all_inner_texts()
    assert badges == [DECISION_TEXT[d] for d in decisions]
    assert page.inner_text("#champion-now .version") == f"v{champion}"
    assert page.locator("#champion-table tbody tr").count() == champion
    for heading in ("Timeline", "Δ per round", "Champion history", "Experiment log"):
        assert page.get_by_role("heading", name=heading, exact=True).is_visible(), heading
    assert page.locator("svg").count() >= 1
    assert page.locator("img, script, iframe, object").count() == 0
    assert not seen.problems, seen.problems
    assert not seen.dialogs, f"a dialog fired: {seen.dialogs}"


def open_first_report(seen: Seen) -> str:
    """Click the first round's report link; the report's verdict as shown; back again."""
    page = seen.page
    link = page.locator("#timeline a.report").first
    with page.expect_navigation():
        link.click()
    assert re.search(r"/runs/[\w.-]+/report\.html$", page.url), page.url
    decision = page.inner_text("#verdict .decision")
    page.go_back()
    return decision


@pytest.fixture(scope="module")
def bundle(world: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("view_bundle") / "site"
    write_bundle(gather(resolve(world, None)), out)
    return out


def test_the_bundle_from_disk(browser: Any, bundle: Path, tmp_path: Path) -> None:  # noqa: F811
    seen = Seen(browser, bundle / "index.html")
    check_dashboard(seen, DECISIONS, champion=3)
    assert open_first_report(seen) == "PROMOTE"  # r0001's verdict (CSS uppercases it)
    not_files = [u for u in seen.requests if not u.startswith(("file:", "data:", "about:"))]
    assert not not_files, f"the bundle asked the network for {not_files}"
    assert not seen.problems, seen.problems
    seen.shoot("dashboard-world.png", tmp_path)


def test_the_canary_shows_as_text(browser: Any, bundle: Path) -> None:  # noqa: F811
    seen = Seen(browser, bundle / "index.html")
    page = seen.page
    trigger = page.locator("#timeline li.round").first.locator(".trigger").inner_text()
    assert CANARY in trigger  # the characters, on screen
    assert CANARY in page.locator("#log").inner_text()
    assert page.evaluate("window.__xss === undefined")
    assert not seen.dialogs and not seen.problems


@pytest.fixture(scope="module")
def served(world: Path) -> Iterator[str]:
    """The real `tuneloop view --serve` on a free loopback port; its URL. Stopped after."""
    proc = subprocess.Popen(
        [TUNELOOP, "view", str(world), "--serve", "--port", "0"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stderr is not None
    url, said, deadline = None, [], time.monotonic() + 90
    while url is None and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            break
        said.append(line)
        found = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
        url = found.group(1) if found else None
    try:
        assert url is not None, f"tuneloop view --serve did not start: {''.join(said)}"
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            pytest.fail("tuneloop view --serve did not stop on SIGTERM within 20 s")


def test_the_served_app(browser: Any, served: str) -> None:  # noqa: F811
    seen = Seen(browser, served)
    check_dashboard(seen, DECISIONS, champion=3)
    assert open_first_report(seen) == "PROMOTE"
    elsewhere = [u for u in seen.requests if not u.startswith(served)]
    assert not elsewhere, f"the app's pages asked elsewhere for {elsewhere}"
    assert not seen.problems and not seen.dialogs


def test_the_demo_flywheel_as_seen(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    if not DEMO.is_file() or not ledger_path(load_config(DEMO)).is_file():
        pytest.skip(f"no flywheel demo ledger for {DEMO}: run examples/arith/flywheel_demo.py")
    with open_ledger(ledger_path(load_config(DEMO))) as ledger:
        outcomes = [r.last.outcome if r.last else "running" for r in ledger.rounds()]
    dashboard = gather(resolve(DEMO, None))
    out = tmp_path / "demo-site"
    write_bundle(dashboard, out)
    seen = Seen(browser, out / "index.html")
    check_dashboard(seen, outcomes, champion=dashboard.champions[-1].version)
    seen.shoot("dashboard.png", tmp_path)  # the whole page: ~650 KB, too big for the README
    for part in ("timeline-section", "delta", "drift-section", "audit-section"):
        name = f"dashboard-{part.removesuffix('-section')}.png"
        seen.shoot(name, tmp_path, f"#{part}", readme=True)
    if any(r.report for r in dashboard.rounds):  # after the shots: a visited link is purple
        expected = next(r for r in dashboard.rounds if r.report).verdict
        assert expected is not None
        assert open_first_report(seen) == expected.decision.upper()
