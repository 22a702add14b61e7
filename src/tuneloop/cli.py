"""The `tuneloop` command: a map from command names to plain functions, and nothing else.

Each phase keeps its command functions (typer-annotated, thin) in `<phase>/command.py`; this
module only names them. Command modules import nothing heavy at module level, so `--help`
stays fast. Exit statuses are the table in `tuneloop.errors`; a usage or input error is one
message that names the file, line or key (for a usage error, after the command's usage line).

typer runs without standalone mode so that our own errors keep their exit status; the usage
errors it then raises are caught here as whichever click it runs on: recent typer (0.29)
vendors its own (`typer._click`, whose exceptions derive from `typer.TyperException`), older
typer uses the `click` package. Catching only `click.ClickException` turned every usage error into
a traceback once typer stopped using the package.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, NoReturn

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
    "archive": "tuneloop.archive.command:archive_app",
    "ledger": "tuneloop.gate.command:ledger_app",
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


def _usage_errors() -> tuple[type[Exception], ...]:
    """The usage-error base classes of every click that typer may be running on."""
    found: list[type[Exception]] = []
    vendored = getattr(typer, "TyperException", None)
    if isinstance(vendored, type) and issubclass(vendored, Exception):
        found.append(vendored)
    try:
        import click
    except ImportError:
        pass
    else:
        found.append(click.ClickException)
    return tuple(found)


def run_app(app: typer.Typer) -> NoReturn:
    """Run a typer app as a console script and exit with the status from `tuneloop.errors`."""
    from tuneloop.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, TuneloopError

    try:
        rc = app(standalone_mode=False)
    except TuneloopError as err:
        typer.echo(f"error: {err}", err=True)
        sys.exit(err.exit_code)
    except typer.Exit as ex:
        sys.exit(ex.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("aborted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except _usage_errors() as err:
        # the usage line, "Try '... --help' for help." and one "Error: ..." line
        err.show()  # type: ignore[attr-defined]
        sys.exit(EXIT_USAGE)
    # without standalone mode click returns typer.Exit's status instead of exiting
    sys.exit(rc if isinstance(rc, int) else EXIT_OK)


def main() -> None:
    run_app(build_app())
