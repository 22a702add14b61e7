"""`python -m tuneloop.serve.app MODEL_DIR --port 8000`: the embedded server as its own process.

The same command as `tuneloop serve MODEL_DIR` (`command.py`), without the CLI table; it is
what the `embedded` backend spawns (`backends.embedded_argv`). This module is only that entry
point, and nothing imports it: the command builds on `embedded/server.py` (bind, load, serve),
which builds on `embedded/routes.py` (the FastAPI routes), so no serve module imports one that
imports it back.
"""

from __future__ import annotations

import typer

from tuneloop.entry import run_app
from tuneloop.serve.command import serve


def main() -> None:
    """Run `serve` as a console script, with the exit statuses of `tuneloop.errors`."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(serve)
    run_app(app)


if __name__ == "__main__":
    main()
