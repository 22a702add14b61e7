"""The proxy's HTTP surface and process: `create_proxy_app(Proxy(settings), log)`, `run_proxy`.

Routes: `/v1/*` forwarded by `Proxy.handle`, a bare ASGI app reached ahead of FastAPI's
middleware and routing (`_ProxyApp`: a proxy's cost per request is what it adds); `GET /health`; the
admin routes `GET|POST /admin/upstream` and `POST /admin/drain`; and, with a `TrafficLog`, the
traffic middleware and `POST /v1/feedback` (`serve/traffic/`). What the proxy does and why is
in `forward.py`; `run_proxy` binds (`lifecycle.bind`, before anything else), writes the admin
token file, and serves the app inside `BrowserGuard` (`serve/guard.py`: no foreign Host or
Origin on any route); the command is `tuneloop proxy` (`serve/command.py`).

The admin routes switch where users' prompts go, so each request must pass, in this order:
a loopback client (403); a `Host` that is a loopback name or the bound host (403: a web page
reaching the proxy through DNS rebinding names its own host); no `Origin`, or the proxy's own
(403: a page's cross-site request carries its origin); `Authorization: Bearer <admin token>`
(401; a proxy without a token answers 403 — the command generates one into a 0600 file,
`--admin-token-file` or `<log-dir>/admin.token`, unless `--admin-token-env` names one); and
for a POST, `Content-Type: application/json` (415: a browser's "simple" cross-site POST can
only be text/plain or a form).
"""

from __future__ import annotations

import contextlib
import logging
import math
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tuneloop.errors import InputError
from tuneloop.records import atomic_write_text
from tuneloop.serve.api_error import ApiError
from tuneloop.serve.guard import BrowserGuard, is_loopback, own_host
from tuneloop.serve.lifecycle import EXIT_BIND, bind
from tuneloop.serve.proxy.forward import Proxy, ProxySettings, check_bearer
from tuneloop.serve.proxy.mirror import Mirror, ShadowSettings
from tuneloop.serve.proxy.relay import send_error
from tuneloop.serve.proxy.urls import normalize_upstream
from tuneloop.serve.traffic import TrafficLog, TrafficMiddleware, install_traffic

FORWARDED_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
_LOG = logging.getLogger("tuneloop.serve.proxy")


def _error(err: ApiError) -> JSONResponse:
    return JSONResponse(err.body(), status_code=err.status)


def create_proxy_app(
    proxy: Proxy, log: TrafficLog | None = None, *, host: str = "127.0.0.1"
) -> FastAPI:
    """The proxy's FastAPI app; with `log`, completions and feedback are logged. `host` is
    the interface it is bound to (a `Host` header naming it is the proxy's own)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        await proxy.aclose()

    forwarding = _Forwarding(proxy, frozenset({"/v1/feedback"} if log is not None else ()))
    app = _ProxyApp(
        title="tuneloop proxy", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan
    )
    app.forwarding = forwarding if log is None else TrafficMiddleware(forwarding, log)
    app.takes = forwarding.takes
    app.state.proxy = proxy

    async def health(request: Request) -> Response:
        status, body = await proxy.health()
        return JSONResponse(body, status_code=status)

    app.add_route("/health", health, methods=["GET"])
    _admin_routes(app, proxy, host)
    # routing sees /v1/* only for the methods not forwarded: a 405
    app.router.routes.append(Route("/v1/{path:path}", forwarding, methods=FORWARDED_METHODS))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        return _error(ApiError(str(exc.detail), status=exc.status_code, type=kind))

    @app.exception_handler(Exception)
    async def internal(request: Request, exc: Exception) -> JSONResponse:
        return _error(ApiError(f"internal error: {exc!r}", status=500, type="server_error"))

    if log is not None:  # for /health, /v1/feedback and closing the log at shutdown
        install_traffic(app, log, api_key=proxy.settings.api_key)
    return app


class _ProxyApp(FastAPI):
    """FastAPI, but forwarded requests go straight to `forwarding` (`_Forwarding`, inside
    the traffic middleware when there is a log), past FastAPI's and Starlette's middleware
    and routing: measured, those layers alone cost more than the rest of a forward."""

    forwarding: ASGIApp
    takes: Callable[[Scope], bool]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.takes(scope):
            await self.forwarding(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)


class _Forwarding:
    """`Proxy.handle` for `/v1/*` but the `local` paths; an unexpected error before the
    response started is a 500 OpenAI-style body."""

    def __init__(self, proxy: Proxy, local: frozenset[str]) -> None:
        self.proxy = proxy
        self.local = local

    def takes(self, scope: Scope) -> bool:
        path: str = scope["path"]
        return (
            path.startswith("/v1/")
            and path not in self.local
            and scope["method"] in FORWARDED_METHODS
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = True
            await send(message)

        try:
            await self.proxy.handle(scope, receive, sending)
        except Exception as exc:
            if started:
                raise
            _LOG.exception("proxy: internal error")
            error = ApiError(f"internal error: {exc!r}", status=500, type="server_error")
            await send_error(send, error)


def _admin_routes(app: FastAPI, proxy: Proxy, bound: str) -> None:
    """`/admin/upstream` (GET, POST) and `/admin/drain` (POST), checked as the module
    docstring says."""

    def check(request: Request) -> None:
        if not is_loopback(request.client.host if request.client else None):
            raise ApiError("admin routes answer loopback clients only", status=403)
        given = request.headers.get("host", "")
        if not own_host(given, bound):
            raise ApiError(f"admin routes: Host {given!r} is not this proxy's", status=403)
        origin = request.headers.get("origin")
        if origin is not None and origin.lower() != f"http://{given}".lower():
            raise ApiError(f"admin routes: Origin {origin!r} is not this proxy's", status=403)
        token = proxy.settings.admin_token
        if token is None:
            raise ApiError(
                "admin routes are off: start the proxy with --admin-token-file PATH (or "
                "--log-dir) to have it write a token there, or --admin-token-env VAR",
                status=403,
            )
        check_bearer(request, token, "admin token")
        if request.method == "POST":
            kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
            if kind != "application/json":
                raise ApiError(
                    f"admin routes take Content-Type: application/json, not {kind or 'none'!r}",
                    status=415,
                    code="unsupported_media_type",
                )

    async def target(request: Request) -> str:
        try:
            body = await request.json()
        except ValueError:
            raise ApiError("body must be JSON", code="invalid_json") from None
        url = body.get("upstream") if isinstance(body, dict) else None
        if not isinstance(url, str):
            raise ApiError('expected {"upstream": "http://host:port"}', param="upstream")
        try:
            return normalize_upstream(url)
        except InputError as err:
            raise ApiError(str(err), param="upstream") from None

    async def renames(request: Request) -> dict[str, str] | None:
        models = (await request.json()).get("models")
        names = isinstance(models, dict) and all(
            isinstance(k, str) and isinstance(v, str) and k and v for k, v in models.items()
        )
        if models is not None and not names:
            raise ApiError(
                'models must map requested names to upstream names, {"champion": "champion-v2"}',
                param="models",
            )
        return models

    async def switch(request: Request) -> str:
        url = await target(request)
        keyed = (await request.json()).get("upstream_key", False)
        if not isinstance(keyed, bool):
            raise ApiError("upstream_key must be true or false", param="upstream_key")
        models = await renames(request)
        try:
            return proxy.switch(url, upstream_key=keyed, models=models)
        except ValueError as err:
            raise ApiError(str(err), param="upstream_key") from None

    async def upstream(request: Request) -> Response:
        try:
            check(request)
            previous = await switch(request) if request.method == "POST" else None
        except ApiError as err:
            return _error(err)
        answer = {
            "upstream": proxy.upstream,
            "models": proxy.models,
            "in_flight": proxy.in_flight(),
        }
        return JSONResponse(answer if previous is None else {**answer, "previous": previous})

    async def drain(request: Request) -> Response:
        try:
            check(request)
            url = await target(request)
            body = await request.json()
            timeout = body.get("timeout_s", 60.0)
            number = isinstance(timeout, (int, float)) and not isinstance(timeout, bool)
            if not number or not math.isfinite(timeout) or timeout < 0:
                raise ApiError("timeout_s must be a finite number ≥ 0", param="timeout_s")
            models = await renames(request)
        except ApiError as err:
            return _error(err)
        drained = await proxy.drain(url, float(timeout), models)
        answer = {"upstream": url, "drained": drained, "in_flight": proxy.in_flight()}
        return JSONResponse(answer, status_code=200 if drained else 504)

    app.add_route("/admin/upstream", upstream, methods=["GET", "POST"])
    app.add_route("/admin/drain", drain, methods=["POST"])


def run_proxy(
    settings: ProxySettings,
    *,
    host: str,
    port: int,
    log: TrafficLog | None,
    port_file: str | None = None,
    token_file: Path | None = None,
    shadow: ShadowSettings | None = None,
) -> int:
    """Bind and serve; the exit status (3: the port is busy). The admin token is written to
    `token_file` (0600, before the port file) once bound. With `shadow`, sampled chat requests
    are mirrored to a challenger (`mirror.py`). On SIGTERM/SIGINT in-flight requests get 30 s
    to finish and the log is closed (at the app's shutdown), then uvicorn re-raises the
    signal, so the process ends as killed by it (143 for SIGTERM)."""
    import uvicorn

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
    if token_file is not None and settings.admin_token is not None:
        write_token(token_file, settings.admin_token)
    if port_file:
        atomic_write_text(Path(port_file), f"{bound}\n")
    mirror = Mirror(shadow) if shadow is not None else None
    app = create_proxy_app(Proxy(settings, mirror), log, host=host)
    where = f" logging to {log.path}" if log is not None else ""
    if shadow is not None:
        where += f"; mirroring {shadow.fraction:g} of chat requests to {shadow.model!r}"
    if token_file is not None:
        where += f"; admin token in {token_file}"
    print(
        f"tuneloop-proxy: http://{host}:{bound}/v1 → {settings.upstream}{where}",
        file=sys.stderr,
        flush=True,
    )
    config = uvicorn.Config(
        BrowserGuard(app, host),
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=30,
    )
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        if log is not None:
            log.close()
    return 0


def write_token(path: Path, token: str) -> None:
    """`token` into `path`, readable by its owner only (the temp file is made 0600)."""
    atomic_write_text(path, f"{token}\n")
    path.chmod(0o600)
