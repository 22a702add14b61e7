"""`tuneloop view --serve`: the dashboard as a local, read-only web app (FastAPI + uvicorn).

    GET /                          the dashboard, read from the ledger at each request
    GET /index.html                the same (the bundle's file name)
    GET /runs/<run_id>/report.html that run's report.html, as found on disk

Nothing else: no write route, no API schema or docs pages (they would load scripts from a
CDN), no static folder — a path is served only when the dashboard links it, so the app never
reads a file the ledger does not point at. Every response says `Cache-Control: no-store`,
`X-Content-Type-Options: nosniff` and carries the page's Content-Security-Policy as a header
too. It binds loopback by default; the command refuses another interface unless told
`--allow-remote` (the ledger's rounds, model paths and log are for the people who run it).
"""

from __future__ import annotations

import ipaddress
import socket
import sys
from typing import TYPE_CHECKING, Any

from tuneloop.errors import TuneloopError
from tuneloop.view.sources import Sources

if TYPE_CHECKING:
    from fastapi import FastAPI

EXIT_BIND = 3
"""A busy or unbindable port (as `tuneloop serve` and `tuneloop proxy`)."""
DASHBOARD_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
REPORT_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
)


def is_loopback(host: str) -> bool:
    """`localhost` or a loopback address (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def create_app(sources: Sources) -> FastAPI:
    """The read-only app over `sources` (see the module docstring)."""
    from fastapi import FastAPI, Request
    from fastapi.responses import FileResponse, HTMLResponse, PlainTextResponse, Response

    from tuneloop.view.history import gather
    from tuneloop.view.page import render_dashboard

    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(TuneloopError)
    async def unreadable(request: Request, err: TuneloopError) -> Response:
        return PlainTextResponse(f"tuneloop view: {err}", status_code=500)

    @app.middleware("http")
    async def headers(request: Request, call_next: Any) -> Response:
        response: Response = await call_next(request)
        response.headers["Cache-Control"] = "no-store"
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        csp = REPORT_CSP if request.url.path.startswith("/runs/") else DASHBOARD_CSP
        response.headers.setdefault("Content-Security-Policy", csp)
        return response

    @app.api_route("/", methods=["GET", "HEAD"], response_class=HTMLResponse)
    @app.api_route("/index.html", methods=["GET", "HEAD"], response_class=HTMLResponse)
    def dashboard() -> HTMLResponse:
        return HTMLResponse(render_dashboard(gather(sources)))

    @app.api_route("/runs/{key}/report.html", methods=["GET", "HEAD"])
    def report(key: str) -> Response:
        for r in gather(sources).rounds:
            if r.report is not None and r.report.key == key:
                return FileResponse(r.report.path, media_type="text/html; charset=utf-8")
        return PlainTextResponse(f"no report.html for run {key!r} in this ledger", 404)

    return app


def url_of(host: str, port: int) -> str:
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def serve(sources: Sources, *, host: str, port: int) -> int:
    """Bind, print the URL, serve until SIGINT/SIGTERM; the exit status (3: cannot bind)."""
    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as err:
        sock.close()
        print(
            f"tuneloop-view: error: cannot bind {host}:{port}: {err.strerror or err}",
            file=sys.stderr,
        )
        return EXIT_BIND
    app = create_app(sources)
    bound = sock.getsockname()[1]
    print(
        f"tuneloop-view: {url_of(host, bound)} (read-only, ledger {sources.ledger}); Ctrl-C stops",
        file=sys.stderr,
        flush=True,
    )
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=5)
    uvicorn.Server(config).run(sockets=[sock])
    return 0
