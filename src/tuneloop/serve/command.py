"""`tuneloop serve MODEL_DIR`: run the embedded OpenAI-compatible server in the foreground.

Also runnable without the CLI table as `python -m tuneloop.serve.app MODEL_DIR --port N`
(that is what `serving()` spawns; see `app.py`). Nothing heavy is imported at module level.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tuneloop.envkeys import read_api_key
from tuneloop.errors import InputError


def serve(
    model_dir: Annotated[Path, typer.Argument(help="A transformers model folder.")],
    host: Annotated[str, typer.Option(help="Interface to bind (loopback by default).")] = (
        "127.0.0.1"
    ),
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="Port to bind; 0 picks a free one.")
    ] = 8000,
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
        int | None, typer.Option(min=1, help="torch threads (default: half the cores, at most 4).")
    ] = None,
    port_file: Annotated[str | None, typer.Option(hidden=True)] = None,
    parent_pid: Annotated[int | None, typer.Option(hidden=True)] = None,
    stop_token_ids: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated token ids that end a completion, replacing the "
            "model's generation-config eos ids."
        ),
    ] = None,
) -> None:
    """Serve MODEL_DIR at http://HOST:PORT/v1 (chat and text completions, batched)."""
    from tuneloop.serve.protocol import Limits
    from tuneloop.serve.routes import ServerSettings
    from tuneloop.serve.server import run_server

    if not (model_dir / "config.json").is_file():
        raise InputError(f"{model_dir}: not a model folder (expected config.json in it)")
    api_key = read_api_key(api_key_env, "--api-key-env")
    settings = ServerSettings(
        stop_token_ids=_token_ids(stop_token_ids),
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


def _token_ids(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        ids = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise InputError(f"--stop-token-ids {text!r}: expected comma-separated integers") from None
    if not ids:
        raise InputError("--stop-token-ids: give at least one token id")
    return ids
