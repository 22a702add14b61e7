"""`tuneloop serve MODEL_DIR`: run the embedded OpenAI-compatible server in the foreground.

Also runnable without the CLI table as `python -m tuneloop.serve.app MODEL_DIR --port N`
(that is what `serving()` spawns). Nothing heavy is imported at module level.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import click
import typer

from tuneloop.envkeys import read_api_key
from tuneloop.errors import InputError, TuneloopError


def serve(
    model_dir: Annotated[Path, typer.Argument(help="A transformers model folder.")],
    host: Annotated[str, typer.Option(help="Interface to bind (loopback by default).")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option(help="Port to bind; 0 picks a free one.")] = 8000,
    api_key_env: Annotated[
        str | None,
        typer.Option(help="Require `Authorization: Bearer $VAR` (names the variable)."),
    ] = None,
    served_model_name: Annotated[
        str | None, typer.Option(help="Name clients request; defaults to MODEL_DIR as given.")
    ] = None,
    max_batch_size: Annotated[int, typer.Option(min=1, help="Most rows per batch.")] = 64,
    batch_wait_ms: Annotated[
        float, typer.Option(min=0, help="Wait this long for more requests per batch.")
    ] = 5.0,
    max_tokens_cap: Annotated[int, typer.Option(min=1, help="Largest max_tokens.")] = 2048,
    max_body_bytes: Annotated[int, typer.Option(min=1, help="Largest request body.")] = 1 << 20,
    threads: Annotated[
        int | None, typer.Option(help="torch threads (default: half the cores, at most 4).")
    ] = None,
    port_file: Annotated[str | None, typer.Option(hidden=True)] = None,
    parent_pid: Annotated[int | None, typer.Option(hidden=True)] = None,
) -> None:
    """Serve MODEL_DIR at http://HOST:PORT/v1 (chat and text completions, batched)."""
    from tuneloop.serve.app import ServerSettings, run_server
    from tuneloop.serve.protocol import Limits

    if not (model_dir / "config.json").is_file():
        raise InputError(f"{model_dir}: not a model folder (expected config.json in it)")
    api_key = read_api_key(api_key_env, "--api-key-env")
    settings = ServerSettings(
        host=host,
        port=port,
        served_model_name=served_model_name,
        api_key=api_key,
        max_batch_size=max_batch_size,
        batch_wait_ms=batch_wait_ms,
        limits=Limits(max_tokens_cap=max_tokens_cap, max_body_bytes=max_body_bytes),
        threads=threads,
        port_file=port_file,
        parent_pid=parent_pid,
    )
    rc = run_server(str(model_dir), settings)
    if rc:
        raise typer.Exit(rc)


def main() -> None:
    """Entry point of `python -m tuneloop.serve.app`: the same command without the CLI table."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(serve)
    try:
        rc = app(standalone_mode=False)
    except TuneloopError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(err.exit_code)
    except click.ClickException as err:
        err.show()
        sys.exit(2)
    # without standalone mode click returns typer.Exit's status instead of exiting
    sys.exit(rc if isinstance(rc, int) else 0)
