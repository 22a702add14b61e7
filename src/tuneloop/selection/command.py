"""`tuneloop select`: a thin typer wrapper (nothing heavy imported here)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tuneloop.config.options import settings_options
from tuneloop.config.portfolio import SelectionConfig
from tuneloop.errors import InputError, refuse_overwriting_inputs, require_writable_dir
from tuneloop.records import write_record
from tuneloop.samplelog import SAMPLES_FILE, SUMMARY_FILE

if TYPE_CHECKING:
    from tuneloop.records.selection import SelectionDecision

DECISION_FILE = "decision.json"
"""What `--out` gets when it names a folder."""


def _arm(arg: str) -> tuple[str, Path]:
    """`PATH` (named by its folder) or `NAME=PATH`."""
    path = Path(arg)
    if "=" in arg and not path.exists():
        name, _, rest = arg.partition("=")
        if not name or not rest:
            raise InputError(f"{arg}: expected a sample-log folder, or NAME=PATH")
        return name, Path(rest)
    folder = path.parent if path.is_file() else path
    return folder.resolve().name, path


def _print(decision: SelectionDecision) -> None:
    from rich.console import Console
    from rich.table import Table

    from tuneloop.selection.compare import cost_text  # numpy and scipy

    pairs = {p.candidate: p for p in decision.pairs}
    reference = decision.default or decision.chosen
    table = Table(
        "arm",
        "mean",
        "cost",
        "advantage",
        "W/L/T",
        "sign p",
        "non-inferior",
        title=f"{decision.rule['rule']} on {decision.n_items} items — vs {reference!r}",
    )
    for arm in decision.arms:
        p = pairs.get(arm.name)
        mark = " (default)" if arm.name == decision.default else ""
        mark += " ✓" if arm.name == decision.chosen else ""
        if p is None:
            rest = ["—", "—", "—", "—"]
        else:
            rest = [
                f"{p.advantage:+.4f}",
                f"{p.wins}/{p.losses}/{p.ties}",
                f"{p.sign_p:.3g}",
                "yes" if p.non_inferior else "no",
            ]
        table.add_row(f"{arm.name}{mark}", f"{arm.mean:.4f}", cost_text(arm.cost), *rest)
    Console(width=160).print(table)
    typer.echo(f"chosen: {decision.chosen} — {decision.reason}")


@settings_options(SelectionConfig, param="rule", skip=frozenset({"slice"}))
def select(
    logs: Annotated[
        list[str],
        typer.Argument(
            help="Sample-log folders of one model on the same items, one per arm; an arm is "
            "named by its folder, or NAME=PATH.",
        ),
    ],
    default: Annotated[
        str | None,
        typer.Option(
            "--default",
            help="The arm that stays unless another beats it (default_stays); omit for the "
            "cheapest (fewest completion tokens per sample).",
        ),
    ] = None,
    scorer: Annotated[
        str | None,
        typer.Option("--scorer", help="Score every log on this scorer's output (eval.metrics)."),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", help=f"Write the decision record here (a folder gets {DECISION_FILE})."
        ),
    ] = None,
    *,
    rule: SelectionConfig,
) -> None:
    """Choose one arm among sample logs of the same items by a rule fixed in advance
    (exit 2 if the logs are of different models or items).

    The rule options are loop.yaml's `portfolio.selection:` keys.
    """
    from tuneloop.selection.compare import compare_logs  # numpy and scipy

    arms = [_arm(a) for a in logs]
    if default is not None and rule.rule != "default_stays":
        raise InputError(f"--default applies to --rule default_stays only (got {rule.rule})")
    by_path = {str(p): name for name, p in arms}
    if default is not None and default not in {n for n, _ in arms} and default in by_path:
        default = by_path[default]  # the default given as its log's path
    if out is not None:
        out = out / DECISION_FILE if out.is_dir() else out
        require_writable_dir(out.parent, "--out")
        folders = [p.parent if p.is_file() else p for _, p in arms]
        refuse_overwriting_inputs(
            [("--out", out)],
            [*(f / n for f in folders for n in (SAMPLES_FILE, SUMMARY_FILE)), *folders],
        )
    decision = compare_logs(arms, rule, default=default, same_model=True, scorer=scorer)
    _print(decision)
    if out is not None:
        write_record(out, decision)
        typer.echo(f"wrote {out}")
