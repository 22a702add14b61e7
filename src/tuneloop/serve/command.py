"""`tuneloop serve MODEL_DIR`: run the embedded OpenAI-compatible server in the foreground.

Also runnable without the CLI table as `python -m tuneloop.serve.app MODEL_DIR --port N`
(that is what `serving()` spawns; see `app.py`). Its settings options are generated from
`ServerConfig` (one definition with loop.yaml's `serve:` keys; the foreground default port is
8000). Nothing heavy is imported at module level.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tuneloop.config import ServerConfig
from tuneloop.config.options import settings_options
from tuneloop.envkeys import read_api_key
from tuneloop.errors import InputError


@settings_options(ServerConfig, param="config", defaults={"port": 8000})
def serve(
    model_dir: Annotated[Path, typer.Argument(help="A transformers model folder.")],
    served_model_name: Annotated[
        str | None, typer.Option(help="Name clients request; defaults to MODEL_DIR as given.")
    ] = None,
    traffic_log: Annotated[
        Path | None,
        typer.Option(
            help="Log every exchange to this folder (scrubbed, fsynced, size-rotated JSONL the "
            "openai_chat ingester reads) and accept POST /v1/feedback."
        ),
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
    *,
    config: ServerConfig,
) -> None:
    """Serve MODEL_DIR at http://HOST:PORT/v1 (chat and text completions, batched).

    The settings options are loop.yaml's `serve:` keys for the embedded server.
    """
    from tuneloop.serve.routes import ServerSettings
    from tuneloop.serve.server import run_server

    if not (model_dir / "config.json").is_file():
        raise InputError(f"{model_dir}: not a model folder (expected config.json in it)")
    settings = ServerSettings(
        config=config,
        stop_token_ids=_token_ids(stop_token_ids),
        served_model_name=served_model_name,
        api_key=read_api_key(config.api_key_env, "--api-key-env"),
        port_file=port_file,
        parent_pid=parent_pid,
        traffic_log=str(traffic_log) if traffic_log is not None else None,
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
