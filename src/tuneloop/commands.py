"""Core commands: `check` (validate a loop.yaml: schema and preflight, every error in one
report) and `plugins` (list registered plugins)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tuneloop.config import LoopConfig, dump_config, load_config
from tuneloop.errors import InputError
from tuneloop.loop.preflight import check_before_compute, preflight
from tuneloop.loop.rounds import RoundRecord, preview_round, round_config
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

    def semantic(cfg: LoopConfig) -> list[tuple[str, str]]:
        # when the schema fails: the preflight of what did validate, in the same report
        try:
            checked, _ = _checked_config(cfg, config)
        except InputError as err:
            return [("base_model", str(err))]
        return [(e.key, e.message) for e in preflight(checked).errors]

    cfg = load_config(config, overrides, semantic=semantic)
    checked, record = _checked_config(cfg, config)
    if record is not None:
        typer.echo(
            f"next round {record.round_id}: from champion v{record.parent_version}, gate slice "
            f"{record.gate_slice}, evaluating {record.eval_slice}",
            err=True,
        )
    for warning in check_before_compute(checked, config, overrides):
        typer.echo(warning, err=True)
    typer.echo(dump_config(cfg), nl=False)


def _checked_config(cfg: LoopConfig, config: Path) -> tuple[LoopConfig, RoundRecord | None]:
    """The config preflight checks: `cfg`, or for a flywheel config (`base_model: champion`)
    the next round's config, with that round's record."""
    if cfg.base_model != "champion":
        return cfg, None
    record = preview_round(cfg, config)
    return round_config(cfg, record), record


def plugins() -> None:
    """List every registered scorer, serving backend, trainer and ingester."""
    from rich.console import Console
    from rich.table import Table

    table = Table("kind", "name", "from")
    for kind, registry in ALL.items():
        for name in registry.names():
            table.add_row(kind, name, registry.origin(name))
    Console().print(table)
