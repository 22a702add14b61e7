"""The `tuneloop` command: a map from command names to plain functions, and nothing else.

Each phase keeps its command functions (typer-annotated, thin) in `<phase>/command.py`; this
module only names them. Command modules import nothing heavy at module level, so `--help`
stays fast. Exit status: 0 success (and `promote` for the gate), 1 a failed phase or a
`reject`, 2 a usage or input error — printed as one message that names the file, line or key.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import typer

# name -> "module:function" (a command) or "module:app" (a group of sub-commands)
COMMANDS: dict[str, str] = {
    "check": "tuneloop.commands:check",
    "plugins": "tuneloop.commands:plugins",
    "serve": "tuneloop.serve.command:serve",
    "eval": "tuneloop.evaluate.command:evaluate",
    "compare": "tuneloop.report.command:compare",
    "power": "tuneloop.report.command:power",
    "train": "tuneloop.train.command:train",
    "merge": "tuneloop.train.command:merge",
    "doctor": "tuneloop.train.command:doctor",
    "ingest": "tuneloop.data.command:ingest",
    "gate": "tuneloop.gate.command:gate",
    "champion": "tuneloop.gate.command:champion",
    "approve": "tuneloop.gate.command:approve",
    "run": "tuneloop.loop.command:run",
}
GROUPS: dict[str, str] = {
    "corpus": "tuneloop.data.command:corpus_app",
    "archive": "tuneloop.archive:archive_app",
}


def _load(target: str) -> Any:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def build_app() -> typer.Typer:
    app = typer.Typer(
        name="tuneloop",
        help="The closed improvement loop for language models: serve, evaluate, train, "
        "merge, re-evaluate, decide with paired statistics, archive.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    for name, target in COMMANDS.items():
        app.command(name)(_load(target))
    for name, target in GROUPS.items():
        app.add_typer(_load(target), name=name)
    return app


def main() -> None:
    from tuneloop.errors import TuneloopError

    app = build_app()
    try:
        rc = app(standalone_mode=False)
    except TuneloopError as err:
        typer.echo(f"error: {err}", err=True)
        sys.exit(err.exit_code)
    except typer.Exit as ex:
        sys.exit(ex.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("aborted", err=True)
        sys.exit(130)
    except Exception as err:  # click usage errors
        import click

        if isinstance(err, click.ClickException):
            err.show()
            sys.exit(2)
        raise
    # click returns the exit code of typer.Exit in non-standalone mode
    sys.exit(rc if isinstance(rc, int) else 0)
