"""The dashboard's HTML (view/page.py): self-contained, escaped, and showing every section."""

from __future__ import annotations

import re
from pathlib import Path

from tuneloop.gate.ledger import open_ledger
from tuneloop.view.history import gather
from tuneloop.view.page import inline_markdown, render_dashboard, timeline
from tuneloop.view.sources import from_ledger, resolve

from ..report.htmlround import CANARY


def test_the_page_is_self_contained_and_escaped(world: Path) -> None:
    html = render_dashboard(gather(resolve(world, None)))
    assert "default-src 'none'" in html and "<script" not in html.lower()
    assert CANARY not in html and "&lt;script&gt;window.__xss" in html
    # no reference leaves the page: every href is a fragment or a relative run report
    hrefs = re.findall(r'href="([^"]*)"', html)
    assert hrefs and all(
        h.startswith("#") or re.fullmatch(r"runs/[\w.-]+/report\.html", h) for h in hrefs
    )
    assert not re.search(r"<[^>]*\ssrc=", html)  # no tag loads anything
    assert "http://" not in html and "https://" not in html
    assert html.count('<li class="round ') == 4 and html.count('<li class="champion-event ') == 1
    for section in (
        "timeline",
        "delta-table",
        "champion-table",
        "drift-table",
        "audit-table",
        "watcher-rounds",
    ):
        assert f'id="{section}"' in html, section
    assert html.count("<svg") == 3  # forest, drift, audit
    assert html.count('class="log-entry') == 9


def test_the_timeline_puts_the_bootstrap_champion_first(world: Path) -> None:
    items = timeline(gather(resolve(world, None)))
    kinds = [f"v{i.champion.version}" if i.champion else i.round.key for i in items]  # type: ignore[union-attr]
    assert kinds == ["v1", "r0001", "r0002", "r0003", "r0004"]  # v2, v3 came from rounds


def test_inline_markdown_marks_up_only_code_and_bold() -> None:
    assert str(inline_markdown("run `x<y>` — **promote**")) == (
        "run <code>x&lt;y&gt;</code> — <strong>promote</strong>"
    )
    assert "<script>" not in str(inline_markdown("`<script>`**<b>**"))


def test_an_empty_ledger_says_so(tmp_path: Path) -> None:
    with open_ledger(tmp_path / "ledger.db"):  # what the first gate would create
        pass
    html = render_dashboard(gather(from_ledger(tmp_path / "ledger.db")))
    assert "Nothing in the ledger yet" in html and "No champion in the ledger yet" in html
    assert "No round has a measured Δ yet" in html and "<svg" not in html
    assert html.count("Not measured") == 2  # drift and audit accuracy


def test_without_a_sequence_rule_the_unbounded_risk_is_shown(world: Path) -> None:
    d = gather(resolve(world, None))
    assert d.budget.rule == "none" and len(d.budget.rounds) == 3  # r0004 never sealed a bar
    html = render_dashboard(d)
    assert 'id="alpha-budget"' in html and 'id="alpha-table"' not in html
    assert (
        "No sequence rule (gate.sequence): 3 rounds at α 0.05 each; P(any false promotion) up "
        "to 1 − ∏(1 − α_k) = 14.3% if none was a real improvement"
    ) in html


def test_a_sequence_rule_shows_alpha_spent_remaining_and_each_rounds_alpha_k(
    tmp_path: Path,
) -> None:
    from ..loop.fakeloop import run_round
    from ..loop.rounds.test_driver import flywheel_config

    config = flywheel_config(tmp_path)
    config.write_text(config.read_text().replace("gate:\n", "gate:\n  sequence: alpha_spending\n"))
    assert run_round(config) == 0 and run_round(config) == 0
    d = gather(resolve(config, None))
    assert [(r.k, r.promoted) for r in d.budget.rounds] == [(1, True), (2, True)]
    html = render_dashboard(d)
    assert html.count('<tr><td class="num">') == 2  # the alpha table: one row per round
    assert (
        "alpha spending, basel series, flywheel α 0.05: α 0.038 spent over 2 rounds, "
        "0.012 of 0.05 remaining (P(any false promotion) ≤ 0.038 so far, ≤ 0.05 ever)."
    ) in html
    assert "Next: round 3 of the sequence gets α_3 = 0.00338." in html
    assert "α_1 0.0304" in html and "α_2 0.0076" in html  # the delta table's α column
    alone = gather(resolve(None, tmp_path / "ledger" / "ledger.db"))  # no config: as declared
    assert alone.budget.how == d.budget.how and alone.budget.next_alpha == d.budget.next_alpha
