"""`tuneloop archive …`: inspect and verify run archives (`reproduce` is the loop's:
`tuneloop.loop.command.reproduce`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tuneloop.archive.verify import read_manifest, verify_archive

archive_app = typer.Typer(help="Inspect, verify and reproduce run archives.", no_args_is_help=True)


@archive_app.command("verify")
def verify(folder: Annotated[Path, typer.Argument(help="An archived run folder.")]) -> None:
    """Re-hash every archived file against manifest.json; exit 1 on any difference."""
    problems = verify_archive(folder)
    if problems:
        for p in problems:
            typer.echo(f"FAIL {p}", err=True)
        raise typer.Exit(1)
    n = len(read_manifest(folder).files)
    typer.echo(f"ok: {n} files verified in {folder}")
