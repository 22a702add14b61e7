"""The shadow report's files: `shadow-report.json` (the `ShadowReport` record) and a page.

    write_report(report, Path("runs/shadow"))     # both files, each atomically

The page is rendered from the record alone (reports read artifacts), so it can be rebuilt
from `shadow-report.json` at any time; it leads with the banner: diagnostic evidence beside
the gate, never a promotion.
"""

from __future__ import annotations

from pathlib import Path

from tuneloop.records import atomic_write_text, write_record
from tuneloop.records.shadow import REPORT_JSON, REPORT_MD, ShadowReport


def write_report(report: ShadowReport, out: Path) -> None:
    """`out/shadow-report.json` and `out/shadow-report.md`, each written atomically."""
    write_record(out / REPORT_JSON, report)
    atomic_write_text(out / REPORT_MD, render(report))


def _share(value: float | None) -> str:
    return "not measured (no pair judged)" if value is None else f"{value:.3f}"


def render(report: ShadowReport) -> str:
    """The report as Markdown."""
    r = report
    interval = (
        "—"
        if r.ci_low is None or r.ci_high is None
        else f"[{r.ci_low:.3f}, {r.ci_high:.3f}] ({r.confidence:.0%}, {r.ci_method})"
    )
    sign = "—" if r.sign_test_p is None else f"{r.sign_test_p:.4g}"
    cost = "not priced" if r.judge_cost_usd is None else f"${r.judge_cost_usd:.4f}"
    challengers = ", ".join(r.challenger_models) or "—"
    champions = ", ".join(r.champion_models) or "—"
    lines = [
        "# Shadow report: challenger vs champion on mirrored live traffic",
        "",
        f"> **{r.banner}**",
        "",
        "| figure | value |",
        "|---|---|",
        f"| challenger preference (wins + ties/2) / n | {_share(r.preference)} |",
        f"| interval | {interval} |",
        f"| wins / ties / losses | {r.wins} / {r.ties} / {r.losses} |",
        f"| sign test p (wins vs losses, two-sided) | {sign} |",
        f"| pairs judged | {r.n_judged} of {r.n_pairs} read |",
        f"| skipped: challenger failed | {r.n_challenger_errors} |",
        f"| skipped: judge could not judge | {r.n_judge_errors} |",
        "",
        f"- Challenger: {challengers}; champion (as users asked for it): {champions}.",
        f"- Judge: `{r.judge.model}` at {r.judge.endpoint}, mode {r.judge.mode}, rubric "
        f"sha256 `{r.judge.rubric_sha256[:12]}`; each pair asked in both orders (a "
        "disagreement is a tie).",
        f"- Judge cost: {cost} ({r.judge_cached} pairs from the judge's cache).",
        f"- Pairs: `{r.pairs_file}` (sha256 `{r.pairs_sha256[:12]}`), written {r.created}.",
        "",
    ]
    return "\n".join(lines)
