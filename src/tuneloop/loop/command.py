"""`tuneloop run loop.yaml`: run, resume or plan the whole loop."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tuneloop.config import load_config


def run(
    config: Annotated[Path, typer.Argument(help="The loop.yaml.")],
    overrides: Annotated[
        list[str] | None, typer.Argument(help="Dotted overrides, e.g. train.steps=50.")
    ] = None,
    from_phase: Annotated[
        str | None, typer.Option("--from", help="Redo this phase and every later one.")
    ] = None,
    only: Annotated[str | None, typer.Option(help="Run only this phase.")] = None,
    plan: Annotated[
        bool, typer.Option("--plan", help="Print what would run and why; run nothing.")
    ] = False,
) -> None:
    """Run every phase of loop.yaml in order; finished phases are skipped on re-run.

    Exit status: 0 the challenger was promoted (or the loop finished with the gate off),
    1 the gate rejected it or it awaits approval, 2 a usage or input error, 3 a phase failed
    (the loop stopped there).
    """
    from rich.console import Console
    from rich.table import Table

    from tuneloop.errors import EXIT_PHASE_FAILED, PhaseFailed
    from tuneloop.loop.preflight import check_before_compute
    from tuneloop.loop.runner import Runner, Selection
    from tuneloop.loop.summary import print_outcome

    cfg = load_config(config, overrides)
    selection = Selection(from_phase=from_phase, only=only)
    selection.validate()
    # Everything checkable without compute, before the runner touches the workdir.
    for warning in check_before_compute(cfg, config, overrides):
        typer.echo(warning, err=True)
    runner = Runner(cfg, config, selection)
    if plan:
        table = Table("phase", "action", "reason")
        for line in runner.plan():
            table.add_row(line.phase, line.action, line.reason)
        Console().print(table)
        return
    try:
        state = runner.run()
    except PhaseFailed as err:
        typer.echo(f"error: {err}", err=True)
        typer.echo(f"state: {cfg.workdir / 'state.json'}", err=True)
        raise typer.Exit(EXIT_PHASE_FAILED) from None
    raise typer.Exit(print_outcome(cfg, state, runner.wall_s, runner.phase_time))
