"""The proxy's HTTP surface and process: `create_proxy_app(Proxy(settings), log)`, `run_proxy`.

Routes: `/v1/*` forwarded by `Proxy.handle`, a bare ASGI app reached ahead of FastAPI's
middleware and routing (`_ProxyApp`: a proxy's cost per request is what it adds); `GET /health`; the
admin routes `GET|POST /admin/upstream` and `POST /admin/drain` (loopback clients only, plus
the admin token when one is set); and, with a `TrafficLog`, the traffic middleware and
`POST /v1/feedback` (`serve/traffic/`). What the proxy does and why is in `forward.py`;
`run_proxy` binds (`lifecycle.bind`, before anything else) and serves; the command is
`tuneloop proxy` (`serve/command.py`).
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
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
from tuneloop.serve.lifecycle import EXIT_BIND, bind
from tuneloop.serve.proxy.forward import Proxy, ProxySettings, check_bearer, normalize_upstream
from tuneloop.serve.proxy.relay import send_error
from tuneloop.serve.traffic import TrafficLog, TrafficMiddleware, install_traffic

FORWARDED_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
_LOG = logging.getLogger("tuneloop.serve.proxy")


def _error(err: ApiError) -> JSONResponse:
    return JSONResponse(err.body(), status_code=err.status)


def is_loopback(host: str | None) -> bool:
    try:
        return host is not None and ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def create_proxy_app(proxy: Proxy, log: TrafficLog | None = None) -> FastAPI:
    """The proxy's FastAPI app; with `log`, completions and feedback are logged."""

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
    _admin_routes(app, proxy)
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


def _admin_routes(app: FastAPI, proxy: Proxy) -> None:
    """`/admin/upstream` (GET, POST) and `/admin/drain` (POST); loopback (+ token) only."""

    def check(request: Request) -> None:
        if not is_loopback(request.client.host if request.client else None):
            raise ApiError("admin routes answer loopback clients only", status=403)
        check_bearer(request, proxy.settings.admin_token, "admin token")

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

    async def upstream(request: Request) -> Response:
        try:
            check(request)
            previous = proxy.switch(await target(request)) if request.method == "POST" else None
        except ApiError as err:
            return _error(err)
        answer = {"upstream": proxy.upstream, "in_flight": proxy.in_flight()}
        return JSONResponse(answer if previous is None else {**answer, "previous": previous})

    async def drain(request: Request) -> Response:
        try:
            check(request)
            url = await target(request)
            body = await request.json()
            timeout = body.get("timeout_s", 60.0)
            if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout < 0:
                raise ApiError("timeout_s must be a number ≥ 0", param="timeout_s")
        except ApiError as err:
            return _error(err)
        drained = await proxy.drain(url, float(timeout))
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
) -> int:
    """Bind and serve; the exit status (3: the port is busy). On SIGTERM/SIGINT in-flight
    requests get 30 s to finish and the log is closed (at the app's shutdown), then uvicorn
    re-raises the signal, so the process ends as killed by it (143 for SIGTERM)."""
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
