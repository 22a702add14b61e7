"""`BrowserGuard`: keep web pages off the loopback server and proxy.

    app = BrowserGuard(create_app(...), host="127.0.0.1")   # what run_server/run_proxy serve

A server on 127.0.0.1 is reachable from every web page the user opens: a page cannot read a
cross-site answer, but it can send a "simple" POST (text/plain, no preflight) — enough to
spend the upstream key, or to write made-up exchanges into the traffic log the flywheel trains
on — and through DNS rebinding (its own name re-resolved to 127.0.0.1) it can even read the
answers. So every HTTP request is refused with a 403 OpenAI-style body when

- the bind is loopback and the `Host` header is not a loopback name or the bound address (a
  rebound page sends its own name; a request with no `Host`, HTTP/1.0, is no browser's), or
- it carries an `Origin` other than `http://<its Host>` (browsers send one with every
  cross-site POST and every `fetch`; the `openai` clients, curl and vLLM's clients send none).

Deliberately not a CORS layer: no tuneloop route is meant for a page of another origin, so
there is nothing to allow. A non-loopback bind (the proxy's `--allow-remote`, `serve --host`)
accepts any `Host`; its clients are whoever can connect, with the API key as their check.
"""

from __future__ import annotations

import ipaddress
import json
from typing import TYPE_CHECKING

from tuneloop.serve.api_error import ApiError

if TYPE_CHECKING:  # `serve/command.py` imports this module: nothing heavy at import time
    from starlette.types import ASGIApp, Message, Receive, Scope, Send


def is_loopback(host: str | None) -> bool:
    """`localhost` or a loopback address (127.0.0.0/8, ::1)."""
    try:
        return host is not None and ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def host_name(header: str) -> str:
    """The host part of a `Host` header (`h:8100`, `[::1]:8100`, `h`), lower-cased."""
    if header.startswith("["):
        return header[1:].partition("]")[0].lower()
    return header.rpartition(":")[0].lower() if header.count(":") == 1 else header.lower()


def own_host(header: str, bound: str) -> bool:
    """Whether a `Host` header names this server: a loopback name or the bound address."""
    name = host_name(header)
    return is_loopback(name) or name == bound.lower()


def refusal(headers: list[tuple[bytes, bytes]], bound: str) -> str | None:
    """Why a request with these (ASGI) headers is refused, or None."""
    given = origin = None
    for name, value in headers:
        if name == b"host":
            given = value.decode("latin-1")
        elif name == b"origin":
            origin = value.decode("latin-1")
    host = given or ""
    if given is not None and is_loopback(bound) and not own_host(host, bound):
        return f"Host {host!r} is not this server's (a loopback server answers its own names)"
    if origin is not None and origin.lower() != f"http://{host}".lower():
        return f"Origin {origin!r} is not this server's: web pages of other sites are refused"
    return None


class BrowserGuard:
    """ASGI middleware refusing what the module docstring says, before the wrapped app."""

    def __init__(self, app: ASGIApp, host: str) -> None:
        self.app = app
        self.host = host

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            why = refusal(scope["headers"], self.host)
            if why is not None:
                await _refuse(send, ApiError(why, status=403, code="forbidden_origin"))
                return
        await self.app(scope, receive, send)


async def _refuse(send: Send, err: ApiError) -> None:
    body = json.dumps(err.body()).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    start: Message = {"type": "http.response.start", "status": err.status, "headers": headers}
    await send(start)
    await send({"type": "http.response.body", "body": body})
