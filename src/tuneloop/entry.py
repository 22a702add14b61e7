"""Run a typer app as a console script: one place maps every outcome to `tuneloop.errors`' exit
statuses. Used by `tuneloop` (`cli.py`) and by `python -m tuneloop.serve.app`.

typer runs without standalone mode so that our own errors keep their exit status; the usage
errors it then raises are caught here as whichever click it runs on: recent typer (0.29)
vendors its own (`typer._click`, whose exceptions derive from `typer.TyperException`), older
typer uses the `click` package. Catching only `click.ClickException` turned every usage error
into a traceback once typer stopped using the package.
"""

from __future__ import annotations

import sys
from typing import NoReturn

import typer

from tuneloop.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, TuneloopError


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
