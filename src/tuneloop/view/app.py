"""`tuneloop view --serve`: the dashboard as a local, read-only web app (FastAPI + uvicorn).

    GET /                          the dashboard, read from the ledger at each request
    GET /index.html                the same (the bundle's file name)
    GET /runs/<run_id>/report.html that run's report.html, as found on disk

Nothing else: no write route, no API schema or docs pages (they would load scripts from a
CDN), no static folder — a path is served only when the dashboard links it, so the app never
reads a file the ledger does not point at. Every response says `Cache-Control: no-store`,
`X-Content-Type-Options: nosniff`, `X-Frame-Options: DENY`, `Referrer-Policy: no-referrer`
and carries the page's Content-Security-Policy as a header too (plus `frame-ancestors 'none'`,
which a `<meta>` cannot say). It binds loopback by default; the command refuses another
interface unless told `--allow-remote` (the ledger's rounds, model paths and log are for the
people who run it). Bound to loopback, it answers only a `Host` that is a loopback name or the
bound address (403 otherwise): a web page that rebinds its own DNS name to 127.0.0.1 names
that name, not ours. With `--allow-remote` any `Host` is served — whoever can connect may read
it anyway. A ledger removed while the app runs is an error page naming it, never re-created.
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
HEADER_CSP = "; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
"""Added to the header's policy: what only a header can say, and no forms or base URLs."""


def is_loopback(host: str) -> bool:
    """`localhost` or a loopback address (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_name(header: str) -> str:
    """The host part of a `Host` header (`h:8150`, `[::1]:8150`, `h`), lower-cased."""
    if header.startswith("["):
        return header[1:].partition("]")[0].lower()
    return header.rpartition(":")[0].lower() if header.count(":") == 1 else header.lower()


def create_app(sources: Sources, *, host: str = "127.0.0.1") -> FastAPI:
    """The read-only app over `sources` bound to `host` (see the module docstring)."""
    from fastapi import FastAPI, Request
    from fastapi.responses import FileResponse, HTMLResponse, PlainTextResponse, Response

    from tuneloop.view.history import gather
    from tuneloop.view.page import render_dashboard

    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(TuneloopError)
    async def unreadable(request: Request, err: TuneloopError) -> Response:
        return PlainTextResponse(f"tuneloop view: {err}", status_code=503)

    checks_host = is_loopback(host)

    @app.middleware("http")
    async def headers(request: Request, call_next: Any) -> Response:
        given = request.headers.get("host", "")
        name = host_name(given)
        response: Response
        if checks_host and not (is_loopback(name) or name == host.lower()):
            response = PlainTextResponse(
                f"tuneloop view: Host {given!r} is not this dashboard's; open it at "
                f"{url_of(host, (request.scope.get('server') or ('', 0))[1])}",
                status_code=403,
            )
        else:
            response = await call_next(request)
        response.headers["Cache-Control"] = "no-store"
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["Referrer-Policy"] = "no-referrer"
        csp = REPORT_CSP if request.url.path.startswith("/runs/") else DASHBOARD_CSP
        response.headers.setdefault("Content-Security-Policy", csp + HEADER_CSP)
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
        # listening before the URL is printed: a client that connects at once waits in the
        # backlog until uvicorn accepts, instead of being refused (seen in CI under load)
        sock.listen(128)
    except OSError as err:
        sock.close()
        print(
            f"tuneloop-view: error: cannot bind {host}:{port}: {err.strerror or err}",
            file=sys.stderr,
        )
        return EXIT_BIND
    app = create_app(sources, host=host)
    bound = sock.getsockname()[1]
    print(
        f"tuneloop-view: {url_of(host, bound)} (read-only, ledger {sources.ledger}); Ctrl-C stops",
        file=sys.stderr,
        flush=True,
    )
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=5)
    uvicorn.Server(config).run(sockets=[sock])
    return 0
