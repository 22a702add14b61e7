"""`tuneloop proxy --upstream URL`: run the OpenAI-compatible reverse proxy in the foreground.

    tuneloop proxy --upstream http://127.0.0.1:8000 --port 8100 --log-dir runs/traffic

See `proxy.py` for what it does (switchable upstream, admin routes, 502s) and `traffic.py`
for the log and `POST /v1/feedback`. Bad options (a URL that is not http(s), an unwritable
or already-used log folder, an unset key variable) exit 2 before anything binds; a busy port
exits 3, like `tuneloop serve`. Nothing heavy is imported at module level.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tuneloop.envkeys import read_api_key
from tuneloop.errors import InputError, require_writable_dir

if TYPE_CHECKING:
    from tuneloop.serve.proxy import ProxySettings
    from tuneloop.serve.traffic import TrafficLog


def proxy(
    upstream: Annotated[
        str,
        typer.Option(help="Base URL to forward to: http://host:port, with or without /v1."),
    ],
    host: Annotated[str, typer.Option(help="Interface to bind (loopback by default).")] = (
        "127.0.0.1"
    ),
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="Port to bind; 0 picks a free one.")
    ] = 8100,
    log_dir: Annotated[
        Path | None,
        typer.Option(help="Log completions and feedback here (traffic.jsonl, scrubbed)."),
    ] = None,
    max_body_bytes: Annotated[int, typer.Option(min=1, help="Largest request body forwarded.")] = 1
    << 20,
    max_log_bytes: Annotated[
        int, typer.Option(min=1024, help="Rotate traffic.jsonl past this size.")
    ] = 256 << 20,
    api_key_env: Annotated[
        str | None,
        typer.Option(help="Require `Authorization: Bearer $VAR` from clients (names the var)."),
    ] = None,
    upstream_key_env: Annotated[
        str | None, typer.Option(help="Send `Authorization: Bearer $VAR` to the upstream.")
    ] = None,
    admin_token_env: Annotated[
        str | None, typer.Option(help="Also require this bearer token on /admin routes.")
    ] = None,
    read_timeout: Annotated[
        float, typer.Option(min=1, help="Seconds to wait for the upstream's next byte.")
    ] = 600.0,
    port_file: Annotated[str | None, typer.Option(hidden=True)] = None,
) -> None:
    """Proxy http://HOST:PORT/v1 to UPSTREAM, logging traffic and feedback with --log-dir."""
    from tuneloop.serve.proxy import ProxySettings, normalize_upstream

    try:
        base = normalize_upstream(upstream)
    except InputError as err:
        raise InputError(f"--upstream: {err}") from None
    settings = ProxySettings(
        upstream=base,
        max_body_bytes=max_body_bytes,
        api_key=read_api_key(api_key_env, "--api-key-env"),
        upstream_key=read_api_key(upstream_key_env, "--upstream-key-env"),
        admin_token=read_api_key(admin_token_env, "--admin-token-env"),
        read_timeout_s=read_timeout,
    )
    log = _open_log(log_dir, max_log_bytes) if log_dir is not None else None
    rc = run_proxy(settings, host=host, port=port, log=log, port_file=port_file)
    if rc:
        raise typer.Exit(rc)


def _open_log(log_dir: Path, max_bytes: int) -> TrafficLog:
    from tuneloop.serve.traffic import TrafficLog

    require_writable_dir(log_dir, "--log-dir")
    log = TrafficLog(log_dir, max_bytes=max_bytes)
    if log.error is not None:
        log.close()
        raise InputError(f"--log-dir: {log.error}")
    return log


def run_proxy(
    settings: ProxySettings,
    *,
    host: str,
    port: int,
    log: TrafficLog | None,
    port_file: str | None = None,
) -> int:
    """Bind and serve; the exit status (3: the port is busy). On SIGTERM/SIGINT in-flight
    requests get 30 s to finish and the log is closed (at the app's shutdown), then uvicorn
    re-raises the signal, so the process ends as killed by it (143 for SIGTERM)."""
    import uvicorn

    from tuneloop.records import atomic_write_text
    from tuneloop.serve.proxy import Proxy
    from tuneloop.serve.proxy_app import create_proxy_app
    from tuneloop.serve.server import EXIT_BIND, bind

    try:
        sock = bind(host, port)
    except OSError as err:
        print(
            f"tuneloop-proxy: error: cannot bind {host}:{port}: {err.strerror or err}",
            file=sys.stderr,
        )
        if log is not None:
            log.close()
        return EXIT_BIND
    bound = sock.getsockname()[1]
    if port_file:
        atomic_write_text(Path(port_file), f"{bound}\n")
    app = create_proxy_app(Proxy(settings), log)
    where = f" logging to {log.path}" if log is not None else ""
    print(
        f"tuneloop-proxy: http://{host}:{bound}/v1 → {settings.upstream}{where}",
        file=sys.stderr,
        flush=True,
    )
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, timeout_graceful_shutdown=30
    )
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        if log is not None:
            log.close()
    return 0
