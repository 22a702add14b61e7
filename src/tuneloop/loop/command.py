"""`tuneloop run loop.yaml`: run, resume or plan the whole loop; `tuneloop archive reproduce
ROOT/RUN`: re-run an archived round and compare (it runs the loop, so it lives here, not in the
archive phase; `tuneloop.cli` maps it into the `archive` group)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from tuneloop.config import LoopConfig, load_config
from tuneloop.errors import EXIT_PHASE_FAILED, AwaitingApproval, InputError, PhaseFailed
from tuneloop.loop.base_overlay import with_chat_template
from tuneloop.loop.layout import RunLayout
from tuneloop.loop.preflight import check_before_compute
from tuneloop.loop.rounds import preflight_errors
from tuneloop.loop.rounds.driver import RoundRequest, execute
from tuneloop.loop.runner import Runner, Selection
from tuneloop.loop.summary import print_outcome


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
    round_id: Annotated[
        str | None,
        typer.Option(
            "--round",
            help="Run a flywheel round: `next` (resume the latest unfinished one, or start "
            "one) or a known round's id like r0003 (resumed, or its end re-reported); "
            "implied by base_model: champion.",
        ),
    ] = None,
    trigger_file: Annotated[
        Path | None,
        typer.Option(help="JSON object: why this round runs (recorded with it); rounds only."),
    ] = None,
) -> None:
    """Run every phase of loop.yaml in order; finished phases are skipped on re-run.

    Exit status: 0 the challenger was promoted (or the loop finished with the gate off),
    1 the gate rejected it or it awaits approval, 2 a usage or input error, 3 a phase failed
    (the loop stopped there).
    """
    # schema and preflight errors in one report, as `tuneloop check` gives them
    cfg = load_config(
        config, overrides, semantic=preflight_errors(config, as_round=round_id is not None)
    )
    selection = Selection(from_phase=from_phase, only=only)
    selection.validate()
    as_round = round_id is not None or cfg.base_model == "champion"
    if trigger_file is not None and not as_round:
        raise InputError(
            "--trigger-file: only a flywheel round records a trigger (add --round next, or "
            "use base_model: champion)"
        )
    if as_round:
        raise typer.Exit(
            _run_round(cfg, config, overrides, selection, round_id, trigger_file, plan)
        )
    # Everything checkable without compute, before the runner touches the workdir.
    for warning in check_before_compute(cfg, config, overrides):
        typer.echo(warning, err=True)
    cfg = chosen_backend(with_chat_template(cfg))
    runner = Runner(cfg, config, selection)
    try:
        if plan:
            _print_plan(runner)
            return
        state = runner.run()
    except AwaitingApproval as err:  # the command the message names takes this config
        raise AwaitingApproval(str(err).replace("--config CONFIG", f"--config {config}")) from None
    except PhaseFailed as err:
        typer.echo(f"error: {err}", err=True)
        typer.echo(f"state: {RunLayout(cfg.workdir).state}", err=True)
        raise typer.Exit(EXIT_PHASE_FAILED) from None
    raise typer.Exit(print_outcome(cfg, state, runner.wall_s, runner.phase_time))


def reproduce(
    folder: Annotated[Path, typer.Argument(help="An archived run folder (ROOT/RUN_ID).")],
) -> None:
    """Re-run an archived round into ROOT/reproduce/RUN_ID/ and compare it with the original.

    Compares Δ, its CI, p, the arm means and the gate decision. Refuses (exit 2, nothing run)
    an archive that does not verify or a pinned base model whose files changed. Exit status:
    0 identical, or different across hardware (expected; both machines are printed); 1
    different on the same hardware (a defect).
    """
    from tuneloop.loop.reproduce import reproduce_archive

    raise typer.Exit(reproduce_archive(folder))


def _run_round(
    cfg: LoopConfig,
    config: Path,
    overrides: list[str] | None,
    selection: Selection,
    asked: str | None,
    trigger_file: Path | None,
    plan: bool,
) -> int:
    """One flywheel round (`tuneloop.loop.rounds.driver`); returns the exit status."""
    request = RoundRequest(config, overrides, selection, asked or "next", trigger_file)
    if plan:
        return execute(cfg, request, plan=_print_plan)
    return execute(cfg, request)


def _print_plan(runner: Runner) -> None:
    table = Table("phase", "action", "reason")
    for line in runner.plan():
        table.add_row(line.phase, line.action, line.reason)
    Console().print(table)


def chosen_backend(cfg: LoopConfig) -> LoopConfig:
    """`cfg` with `serve.backend: auto` resolved for its base, the choice said on stderr."""
    from tuneloop.backend_choice import resolve_serve

    cfg, choice = resolve_serve(cfg)
    if choice is not None:
        typer.echo(choice.line, err=True)
    return cfg
