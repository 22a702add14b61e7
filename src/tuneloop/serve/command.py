"""The serve phase's commands: `tuneloop serve MODEL_DIR` and `tuneloop proxy --upstream URL`.

    tuneloop serve examples/arith/model --port 8000
    tuneloop proxy --upstream http://127.0.0.1:8000 --port 8100 --log-dir runs/traffic

`serve` runs the embedded OpenAI-compatible server (`embedded/`) in the foreground; it is also
runnable without the CLI table as `python -m tuneloop.serve.app MODEL_DIR --port N` (that is
what the `embedded` backend spawns; see `app.py`). Its settings options are generated from
`ServerConfig` (one definition with loop.yaml's `serve:` keys; the foreground default port is
8000).

`proxy` runs the reverse proxy (`proxy/`: switchable upstream, admin routes, 502s) with, under
`--log-dir`, the traffic log and `POST /v1/feedback` (`traffic/`). Bad options (a URL that is
not http(s) or is the proxy's own address, an unwritable or already-used log folder, an unset
key variable, a non-loopback `--host` with neither `--api-key-env` nor `--allow-remote`) exit 2
before anything binds; a busy port exits 3, like `tuneloop serve`. `serve` only warns about
such a host: loop.yaml's `serve.host` reaches it through the embedded backend, after `check`.
The admin routes' token is `$VAR` of `--admin-token-env`, or one generated at each start into
`--admin-token-file` (default `<log-dir>/admin.token`; 0600); with neither, the admin routes
are off. `--shadow URL --shadow-model NAME` mirrors `--shadow-fraction` of chat requests to a
challenger (`proxy/mirror.py`); it needs `--log-dir` and a challenger on loopback or at the
`--upstream`'s origin, else exit 2.

Nothing heavy is imported at module level (FastAPI and aiohttp only when a command runs), so
`tuneloop --help` stays fast.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Annotated
from urllib.parse import urlsplit

import typer

from tuneloop.config import ServerConfig
from tuneloop.config.options import settings_options
from tuneloop.envkeys import read_api_key
from tuneloop.errors import InputError, require_writable_dir
from tuneloop.serve.guard import is_loopback

if TYPE_CHECKING:
    from tuneloop.serve.proxy.mirror import ShadowSettings
    from tuneloop.serve.traffic import TrafficLog


@settings_options(ServerConfig, param="config", defaults={"port": 8000})
def serve(
    model_dir: Annotated[
        Path,
        typer.Argument(
            help="A transformers model folder, or a cascade descriptor (JSON, kind: cascade)."
        ),
    ],
    served_model_name: Annotated[
        str | None, typer.Option(help="Name clients request; defaults to MODEL_DIR's folder name.")
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

    The settings options are loop.yaml's `serve:` keys for the embedded server. A cascade
    descriptor is served as one endpoint: its local tiers on ports of their own, the cascade
    in front on HOST:PORT (each answer names its tier; put `tuneloop proxy --log-dir` in front
    to log them).
    """
    from tuneloop.cascade_spec import is_cascade_file

    if is_cascade_file(model_dir):
        if traffic_log is not None:
            raise InputError(
                "--traffic-log: a cascade is logged by `tuneloop proxy --log-dir` in front of it"
            )
        _serve_cascade(model_dir, config)
        return
    from tuneloop.serve.embedded import ServerSettings, run_server  # FastAPI

    if not (model_dir / "config.json").is_file():
        raise InputError(f"{model_dir}: not a model folder (expected config.json in it)")
    api_key = read_api_key(config.api_key_env, "--api-key-env")
    if not is_loopback(config.host) and api_key is None:
        # a warning, not a refusal: loop.yaml's `serve.host` reaches here through the embedded
        # backend, and a loop that `check` passed must not fail at its first evaluation
        typer.echo(
            f"tuneloop-serve: warning: --host {config.host} is not loopback and no "
            "--api-key-env is set: anyone who can connect can use the model",
            err=True,
        )
    settings = ServerSettings(
        config=config,
        stop_token_ids=_token_ids(stop_token_ids),
        served_model_name=served_model_name,
        api_key=api_key,
        port_file=port_file,
        parent_pid=parent_pid,
        traffic_log=str(traffic_log) if traffic_log is not None else None,
    )
    rc = run_server(str(model_dir), settings)
    if rc:
        raise typer.Exit(rc)


def _serve_cascade(descriptor: Path, config: ServerConfig) -> None:
    """Serve the cascade in the foreground until SIGINT or SIGTERM."""
    import signal
    import threading

    from tuneloop.cascade_spec import load_cascade
    from tuneloop.config import ServeConfig
    from tuneloop.serve.cascade.backend import serve_cascade

    spec = load_cascade(descriptor)
    serve = ServeConfig.model_validate(config.model_dump())
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with serve_cascade(spec, serve) as ep:
        tiers = ", ".join(t.name for t in spec.tiers)
        typer.echo(f"serving cascade {ep.model!r} ({tiers}) on {ep.base_url}", err=True)
        stop.wait()


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
        str | None,
        typer.Option(help="The bearer token /admin routes require (names the var)."),
    ] = None,
    admin_token_file: Annotated[
        Path | None,
        typer.Option(
            help="Without --admin-token-env: generate the /admin token into this file (0600) "
            "at start. Default: LOG_DIR/admin.token; with neither, /admin routes are off."
        ),
    ] = None,
    allow_remote: Annotated[
        bool,
        typer.Option(
            "--allow-remote",
            help="Bind a non-loopback --host without --api-key-env (anyone who can connect "
            "uses the upstream).",
        ),
    ] = False,
    read_timeout: Annotated[
        float, typer.Option(min=1, help="Seconds to wait for the upstream's next byte.")
    ] = 600.0,
    shadow: Annotated[
        str | None,
        typer.Option(
            help="Mirror sampled chat requests to this challenger (loopback, or the --upstream's "
            "origin), storing paired answers in LOG_DIR/shadow/; its answers are never served."
        ),
    ] = None,
    shadow_model: Annotated[
        str | None, typer.Option(help="The model name the --shadow challenger is asked for.")
    ] = None,
    shadow_fraction: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Share of chat requests mirrored (--shadow).")
    ] = 0.1,
    shadow_concurrency: Annotated[
        int,
        typer.Option(min=1, help="Most mirrors in flight; a sampled request beyond is skipped."),
    ] = 8,
    port_file: Annotated[str | None, typer.Option(hidden=True)] = None,
) -> None:
    """Proxy http://HOST:PORT/v1 to UPSTREAM, logging traffic and feedback with --log-dir.

    With --shadow, a sampled share of chat requests is asked again of a challenger after the
    user's answer is sent, and both answers are stored for `tuneloop shadow report`.
    """
    from tuneloop.serve.proxy import ProxySettings, normalize_upstream, run_proxy  # aiohttp

    try:
        base = normalize_upstream(upstream)
    except InputError as err:
        raise InputError(f"--upstream: {err}") from None
    _check_not_itself(base, host, port)
    api_key = read_api_key(api_key_env, "--api-key-env")
    _check_host(host, api_key is not None, allow_remote)
    admin_token_file = _token_file(admin_token_env, admin_token_file, log_dir)
    admin_token = read_api_key(admin_token_env, "--admin-token-env")
    if admin_token_file is not None:
        admin_token = secrets.token_urlsafe(32)  # new at every start; written once bound
    upstream_key = read_api_key(upstream_key_env, "--upstream-key-env")
    mirror = None
    if shadow is not None or shadow_model is not None:
        mirror = _shadow(
            shadow, shadow_model, log_dir, base, upstream_key, shadow_fraction, shadow_concurrency
        )
        _check_not_itself(mirror.url, host, port, "--shadow")
    settings = ProxySettings(
        upstream=base,
        max_body_bytes=max_body_bytes,
        api_key=api_key,
        upstream_key=upstream_key,
        admin_token=admin_token,
        read_timeout_s=read_timeout,
    )
    log = _open_log(log_dir, max_log_bytes) if log_dir is not None else None
    rc = run_proxy(
        settings,
        host=host,
        port=port,
        log=log,
        port_file=port_file,
        token_file=admin_token_file,
        shadow=mirror,
    )
    if rc:
        raise typer.Exit(rc)


def _shadow(
    url: str | None,
    model: str | None,
    log_dir: Path | None,
    upstream: str,
    key: str | None,
    fraction: float,
    concurrency: int,
) -> ShadowSettings:
    """The mirror's settings from the --shadow options; InputError for a challenger elsewhere
    than loopback or the upstream's origin, or a missing --shadow-model or --log-dir."""
    from tuneloop.serve.proxy.mirror import ShadowSettings, check_shadow, shadow_auth

    if url is None:
        raise InputError("--shadow-model: give --shadow URL, the challenger to mirror to")
    if model is None:
        raise InputError("--shadow: give --shadow-model NAME, the challenger's served name")
    if log_dir is None:
        raise InputError("--shadow: give --log-dir DIR; the paired answers go to DIR/shadow/")
    try:
        base = check_shadow(url, upstream)
    except InputError as err:
        text = str(err)
        raise InputError(text if text.startswith("--shadow") else f"--shadow: {text}") from None
    require_writable_dir(log_dir / "shadow", "--log-dir")
    auth = shadow_auth(base, upstream, key)
    return ShadowSettings(
        url=base,
        model=model,
        log_dir=log_dir,
        fraction=fraction,
        concurrency=concurrency,
        auth=auth,
    )


def _token_file(env_var: str | None, given: Path | None, log_dir: Path | None) -> Path | None:
    """Where the proxy writes the admin token it generates; None when `env_var` names the
    token (or nothing names a place: the admin routes are off)."""
    if env_var and given is not None:
        raise InputError(
            "--admin-token-env and --admin-token-file: give one (a token of yours, or a file "
            "for the proxy to write its own into)"
        )
    if given is not None:
        if given.is_dir():
            raise InputError(f"--admin-token-file {given}: is a folder, not a file")
        require_writable_dir(given.parent, "--admin-token-file")
        return given
    if env_var or log_dir is None:
        return None
    return log_dir / "admin.token"  # --log-dir itself is checked when the log opens


def _check_not_itself(upstream: str, host: str, port: int, option: str = "--upstream") -> None:
    """An upstream that is the proxy's own address would forward every request to itself
    until the connection pool runs dry (each client hangs); a shadow there would mirror
    into itself."""
    parts = urlsplit(upstream)
    same_host = parts.hostname == host or (is_loopback(parts.hostname) and is_loopback(host))
    default = 443 if parts.scheme == "https" else 80
    if port and same_host and (parts.port or default) == port:
        raise InputError(
            f"{option} {upstream}: that is this proxy's own address (--host {host} --port "
            f"{port}); name the server to forward to"
        )


def _check_host(host: str, keyed: bool, allow_remote: bool) -> None:
    """A non-loopback bind needs a client key or `--allow-remote` (as `tuneloop view`)."""
    if not is_loopback(host) and not keyed and not allow_remote:
        raise InputError(
            f"--host {host}: not a loopback address, and no --api-key-env: anyone who can "
            "connect would use the upstream (and its key). Give --api-key-env VAR, bind "
            "127.0.0.1 (the default), or pass --allow-remote to bind it open anyway"
        )


def _open_log(log_dir: Path, max_bytes: int) -> TrafficLog:
    from tuneloop.serve.traffic import TrafficLog  # FastAPI

    require_writable_dir(log_dir, "--log-dir")
    log = TrafficLog(log_dir, max_bytes=max_bytes)
    if log.error is not None:
        log.close()
        raise InputError(f"--log-dir: {log.error}")
    return log
