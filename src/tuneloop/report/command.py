"""`tuneloop compare` and `tuneloop power`: thin typer wrappers (nothing heavy imported here)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tuneloop.config import ReportConfig
from tuneloop.config.options import settings_options


@settings_options(ReportConfig, param="settings")
def compare(
    pre_log: Annotated[Path, typer.Argument(help="Sample-log folder of the pre arm.")],
    post_log: Annotated[Path, typer.Argument(help="Sample-log folder of the post arm.")],
    out: Annotated[Path, typer.Option("--out", help="Folder for delta.json, delta.md, PNGs.")],
    figures: Annotated[bool, typer.Option(help="Draw passk.png and items.png.")] = True,
    html: Annotated[
        Path | None,
        typer.Option(
            "--html",
            help="Also write a self-contained report.html to this file (or into this folder).",
        ),
    ] = None,
    *,
    settings: ReportConfig,
) -> None:
    """Paired delta report of two evals of the same suite items (exit 2 if incomparable).

    The settings options are loop.yaml's `report:` keys.
    """
    from rich.console import Console

    from tuneloop.errors import refuse_overwriting_inputs, require_writable_dir
    from tuneloop.report.build import DELTA_FILE, ITEMS_FIGURE, MARKDOWN_FILE, PASSK_FIGURE
    from tuneloop.report.build import compare as run_compare
    from tuneloop.report.html import HTML_FILE, write_compare_html
    from tuneloop.samplelog import SAMPLES_FILE, SUMMARY_FILE

    require_writable_dir(out, "--out")
    if html is not None:
        # a folder (an existing one, or --out itself) gets report.html inside it
        html = html / HTML_FILE if html.is_dir() or html.resolve() == out.resolve() else html
        require_writable_dir(html.parent, "--html")
    # nothing written may replace a log being read (`--html PRE/samples.jsonl` did, exit 0)
    logs = [p.parent if p.is_file() else p for p in (pre_log, post_log)]
    written = [("--out", out / n) for n in (DELTA_FILE, MARKDOWN_FILE, PASSK_FIGURE, ITEMS_FIGURE)]
    refuse_overwriting_inputs(
        [*written, *([("--html", html)] if html is not None else [])],
        [*(log / n for log in logs for n in (SAMPLES_FILE, SUMMARY_FILE)), pre_log, post_log],
    )
    console = Console(stderr=True)
    with console.status("comparing sample logs…"):
        r = run_compare(pre_log, post_log, out, settings, figures=figures)
        if html is not None:
            write_compare_html(html, r, pre_log, post_log)
    lo, hi = r.delta_ci
    typer.echo(
        f"pre {r.pre.mean:.4f} → post {r.post.mean:.4f}: Δ = {r.delta:+.4f} "
        f"[{lo:+.4f}, {hi:+.4f}] ({r.settings.confidence:.0%}), p two-sided = "
        f"{r.p_two_sided:.3g}, one-sided = {r.p_greater:.3g}; {r.n_items} items"
    )
    typer.echo(f"wrote {out / DELTA_FILE} and {out / MARKDOWN_FILE}")
    if html is not None:
        typer.echo(f"wrote {html}")


def power(
    pilot: Annotated[
        list[Path],
        typer.Option(
            "--pilot",
            help="Pilot sample log; give two (same items) to measure the paired sd directly.",
        ),
    ],
    effect: Annotated[
        float | None, typer.Option(help="Target improvement Δ; omit to print the MDE.")
    ] = None,
    alpha: Annotated[float, typer.Option(help="Two-sided significance level.")] = 0.05,
    power: Annotated[float, typer.Option("--power", help="Desired power.")] = 0.8,
    correlation: Annotated[
        float, typer.Option(help="Assumed item correlation of the two models (one pilot).")
    ] = 0.5,
) -> None:
    """Items needed to detect --effect, or the minimum detectable effect of the pilot."""
    from tuneloop.report.build import load_log
    from tuneloop.report.power import check_targets, plan_power

    check_targets(effect, alpha, power)  # before reading the pilots
    plan = plan_power([load_log(p) for p in pilot], effect, alpha, power, correlation)
    typer.echo(
        f"pilot: {plan.n_items} items, sd of item differences {plan.sd_diff:.4f} ({plan.source})"
    )
    if plan.items_needed is not None:
        typer.echo(
            f"items needed to detect Δ = {plan.effect:g} at two-sided α = {alpha:g} with "
            f"power {power:g}: {plan.items_needed}"
        )
    else:
        typer.echo(
            f"minimum detectable effect with {plan.n_items} items at two-sided α = {alpha:g}, "
            f"power {power:g}: {plan.mde:.4f}"
        )
