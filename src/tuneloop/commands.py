"""Core commands: `check` (validate a loop.yaml: schema and preflight, every error in one
report) and `plugins` (list registered plugins)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tuneloop.config import dump_config, load_config
from tuneloop.loop.preflight import check_before_compute
from tuneloop.loop.rounds import checked_config, preflight_errors
from tuneloop.registry import ALL

Overrides = Annotated[
    list[str] | None,
    typer.Argument(help="Dotted overrides applied before validation, e.g. train.steps=50."),
]


def check(
    config: Annotated[Path, typer.Argument(help="The loop.yaml to validate.")],
    overrides: Overrides = None,
) -> None:
    """Validate a loop.yaml before any compute: the schema, then every plugin name, slice,
    input path and cross-section rule (all errors at once with their YAML key and line, exit
    2, nothing written); a power warning goes to stderr. Prints the resolved config."""
    from tuneloop.backend_choice import resolve_serve

    # when the schema fails: the preflight of what did validate, in the same report
    cfg = load_config(config, overrides, semantic=preflight_errors(config))
    checked, record = checked_config(cfg, config)
    if record is not None:
        typer.echo(
            f"next round {record.round_id}: from champion v{record.parent_version}, gate slice "
            f"{record.gate_slice}, evaluating {record.eval_slice}",
            err=True,
        )
    for warning in check_before_compute(checked, config, overrides):
        typer.echo(warning, err=True)
    _, choice = resolve_serve(checked)
    if choice is not None:  # what `run` would serve with
        typer.echo(choice.line, err=True)
    typer.echo(dump_config(cfg), nl=False)


def plugins() -> None:
    """List every registered scorer, serving backend, trainer and ingester."""
    from rich.console import Console
    from rich.table import Table

    table = Table("kind", "name", "from")
    for kind, registry in ALL.items():
        for name in registry.names():
            table.add_row(kind, name, registry.origin(name))
    Console().print(table)
