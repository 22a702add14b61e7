"""An OpenAI-compatible reverse proxy with a switchable upstream and the traffic log.

Run: `tuneloop proxy --upstream http://127.0.0.1:8000 --port 8100 --log-dir traffic/`
(`serve/command.py`; the routes and the process are `app.py`; this module is the forwarding
itself, `relay.py` its ASGI messages).
Clients talk to `http://127.0.0.1:8100/v1`; every `/v1/*` request is forwarded to the current
upstream with its body, query and headers, and the answer — JSON or a `text/event-stream` — is
relayed chunk by chunk as it arrives. With `--log-dir` completions and `POST /v1/feedback` go
to a `TrafficLog` (`serve/traffic/`), which is what the flywheel trains on.

How, and why so. `Proxy.handle` is a bare ASGI app (`app.py` sends `/v1/*` to it ahead
of FastAPI's middleware and routing, so no `Request` or `Response` objects are made per
request) over one aiohttp `ClientSession` per event loop (keep-alive pooled, C HTTP parser).
Measured with `benchmarks/proxy.py` (loopback, concurrency 32, 2 cores), a FastAPI route over
httpx transports cost ~960 µs CPU a request, most of it in httpx/httpcore/anyio (cProfile:
~2,700 Python calls a request); this path costs ~270 µs, most of it the four socket writes
and reads a relayed exchange needs.

Switching. `Proxy.switch(url)` swaps the upstream in one assignment: a request picks its
upstream when it arrives and keeps it to its last byte, so requests already in flight finish
on the old server and every later one goes to the new. Each upstream counts its in-flight
requests; `await proxy.drain(old)` returns once the old one is idle, after which it may be
stopped. Another process (the flywheel watcher re-serving a new champion) does the same over
HTTP: `POST /admin/upstream {"upstream": URL}`, `GET /admin/upstream` (current + in-flight
counts), `POST /admin/drain {"upstream": URL, "timeout_s": S}`. The admin routes' own checks
(token, Host, Origin, Content-Type) are `app.py`'s.

Model names. A switch may also rename models on the way up: `{"upstream": URL, "models":
{"champion": "champion-v2"}}` sends a request whose body asks for `champion` to URL as
`champion-v2` (other names, and bodies that are not a JSON object, pass as sent; the answer is
relayed untouched, so it names the model that answered). This is how the managed service
hot-loads a new LoRA adapter into the vLLM server already running: the same URL under a new
name is a new route, counted on its own, so `POST /admin/drain {"upstream": URL, "models":
{...}}` waits for the old route's requests only (without `models`, a drain waits for every
route to URL).

The upstream key (`--upstream-key-env`) belongs to the configured upstream's origin (scheme,
host and port): it is sent to an upstream switched in at runtime only when the switch says so
(`POST /admin/upstream {"upstream": URL, "upstream_key": true}`, what the flywheel's managed
service does for its own servers, which all take the same key), so that a switch — even an
authorized one — never hands the key to a listener nobody configured for it. A switched-in
upstream without it gets no `Authorization` at all.

Shadow mirroring (`--shadow`, `mirror.py`): with a `Mirror`, a sampled chat request's answer
is copied as it is relayed, and the same request is asked of a challenger in the background
once the user's answer is out; its answer is stored beside the champion's, never served.

Errors are OpenAI-style bodies: an unreachable upstream is a 502 naming the reason (a network
error before the first response byte — a refused connect, a pooled connection the upstream
had just closed — is retried once first), a timeout a 504, a body over `--max-body-bytes` a
413. `GET /health` is 200 when the upstream's /health answers, else 502, and carries the
traffic log's health.

Deliberately different from a generic proxy: the request body is read whole (up to the cap)
before forwarding, because the log needs it and a failed connect can then be retried; the
upstream is asked for `accept-encoding: identity` (and nothing is decompressed), so the log
reads plain JSON (a loopback hop gains nothing from gzip); no header is added that the client
did not send, besides `host` and `content-length`; upstream URLs stay out of client-facing
error messages.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import aiohttp
from starlette.types import Receive, Scope, Send
from yarl import URL

from tuneloop.serve.api_error import ApiError
from tuneloop.serve.proxy.relay import HOP_BY_HOP, read_body, reason, relay, send_error
from tuneloop.serve.proxy.urls import normalize_upstream, origin

if TYPE_CHECKING:
    from starlette.requests import Request

    from tuneloop.serve.proxy.mirror import Mirror

# ASGI gives header names in lower case, as bytes
DROP_REQUEST = frozenset(
    h.encode()
    for h in HOP_BY_HOP | {"host", "content-length", "accept-encoding", "authorization", "expect"}
)  # `expect: 100-continue` was the client's hop: the proxy holds the whole body already
NOT_ADDED = ("Accept", "User-Agent", "Content-Type")
"""aiohttp's default request headers, left out: the upstream sees what the client sent."""
KEEPALIVE_S = 4.0
"""Idle pooled connections are closed after this, under uvicorn's 5 s keep-alive, so that the
proxy seldom reuses a connection the upstream is closing (that case is retried anyway)."""
_LOG = logging.getLogger("tuneloop.serve.proxy")


@dataclass(frozen=True)
class ProxySettings:
    """Everything the proxy needs besides where it binds."""

    upstream: str
    """Base URL of the first upstream (`http://host:port`, with or without `/v1`)."""
    max_body_bytes: int = 1 << 20
    """Largest request body forwarded; larger ones get a 413."""
    api_key: str | None = None
    """Bearer token clients must send (read from an env var, never argv)."""
    upstream_key: str | None = None
    """Bearer token sent upstream; None forwards the client's own unless `api_key` is set."""
    admin_token: str | None = None
    """Bearer token the admin routes also need (they answer loopback clients only)."""
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 600.0
    """Longest wait for the next byte from the upstream (a long generation)."""
    max_connections: int = 512


Models = tuple[tuple[str, str], ...]
"""A route's renames, requested name → upstream name, sorted (hashable: part of its key)."""


def route_models(models: dict[str, str] | None) -> Models:
    return tuple(sorted((models or {}).items()))


class Upstream:
    """One route: an upstream base URL, the model names it renames, and the requests in
    flight on it (changed only on the proxy's event loop; read from anywhere)."""

    def __init__(self, url: str, models: Models = ()) -> None:
        self.url = url
        self.models = models
        self._renames = dict(models)
        self.in_flight = 0
        self.auth: str | None = None
        """The `Authorization` value sent to it: the upstream key, where it is configured for
        this upstream (see the module docstring)."""

    def renamed(self, body: bytes) -> bytes:
        """`body` with its `model` renamed as this route says; as sent when there is nothing
        to rename (no renames, not a JSON object, another name)."""
        if not self._renames or not body:
            return body
        try:
            request = json.loads(body)
        except ValueError:
            return body
        name = request.get("model") if isinstance(request, dict) else None
        if not isinstance(name, str) or name not in self._renames:
            return body
        request["model"] = self._renames[name]
        return json.dumps(request, ensure_ascii=False).encode()


class Proxy:
    """Forwards requests to the current upstream (see module docstring)."""

    def __init__(self, settings: ProxySettings, mirror: Mirror | None = None) -> None:
        self.settings = settings
        self.mirror = mirror
        """Shadow mirroring of sampled chat requests to a challenger (`mirror.py`), or None."""
        self._lock = threading.Lock()  # switch() may be called from another thread
        self._upstreams: dict[tuple[str, Models], Upstream] = {}
        self._current = self._get(normalize_upstream(settings.upstream))
        self._origin = origin(self._current.url)
        self._sessions: dict[asyncio.AbstractEventLoop, aiohttp.ClientSession] = {}
        read = settings.read_timeout_s
        # `connect` bounds waiting for a pooled connection plus connecting, like httpx's pool
        self._timeout = aiohttp.ClientTimeout(
            total=None, connect=read, sock_connect=settings.connect_timeout_s, sock_read=read
        )
        upstream_key = settings.upstream_key
        self._upstream_auth = None if upstream_key is None else f"Bearer {upstream_key}"
        self._current.auth = self._upstream_auth
        api_key = settings.api_key
        self._client_auth = None if api_key is None else f"Bearer {api_key}".encode()

    @property
    def upstream(self) -> str:
        return self._current.url

    @property
    def models(self) -> dict[str, str]:
        """The current route's renames (requested name → upstream name)."""
        return dict(self._current.models)

    def switch(
        self, url: str, upstream_key: bool = False, models: dict[str, str] | None = None
    ) -> str:
        """Send new requests to `url` from now on, renaming `models` (requested name →
        upstream name) on the way; returns the previous upstream's URL.

        The upstream key goes to `url` only when it has the configured upstream's origin or
        `upstream_key` says so; ValueError when `upstream_key` is asked of a proxy without one.
        """
        if upstream_key and self._upstream_auth is None:
            raise ValueError("upstream_key: this proxy has no upstream key (--upstream-key-env)")
        new = self._get(normalize_upstream(url), route_models(models))
        keyed = upstream_key or origin(new.url) == self._origin
        new.auth = self._upstream_auth if keyed else None
        with self._lock:
            old, self._current = self._current, new
        key = "with" if new.auth is not None else "without"
        renames = "".join(f", {a} as {b}" for a, b in new.models)
        _LOG.warning(
            "upstream switched: %s → %s%s (%s the upstream key)", old.url, new.url, renames, key
        )
        return old.url

    def in_flight(self) -> dict[str, int]:
        """Requests in flight per upstream URL (upstreams ever used, all their routes)."""
        counts: dict[str, int] = {}
        with self._lock:
            for route in self._upstreams.values():
                counts[route.url] = counts.get(route.url, 0) + route.in_flight
        return counts

    async def drain(
        self, url: str, timeout: float | None = None, models: dict[str, str] | None = None
    ) -> bool:
        """Wait until no request is in flight to `url` (with `models`, on that route only);
        False if `timeout` passed first.

        Polls every 10 ms rather than waiting on an event, so that it works from any event
        loop or thread (a watcher need not share the proxy's loop); a drain is rare.
        """
        url, key = normalize_upstream(url), route_models(models)
        with self._lock:
            routes = [
                route
                for (at, renames), route in self._upstreams.items()
                if at == url and (models is None or renames == key)
            ]
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while any(route.in_flight > 0 for route in routes):
            if deadline is not None and loop.time() >= deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    def _get(self, url: str, models: Models = ()) -> Upstream:
        with self._lock:
            return self._upstreams.setdefault((url, models), Upstream(url, models))

    def _session(self) -> aiohttp.ClientSession:
        """This event loop's client session (a session belongs to the loop that made it)."""
        loop = asyncio.get_running_loop()
        session = self._sessions.get(loop)
        if session is None or session.closed:
            connector = aiohttp.TCPConnector(
                limit=self.settings.max_connections, limit_per_host=0, keepalive_timeout=KEEPALIVE_S
            )
            session = aiohttp.ClientSession(
                connector=connector,
                timeout=self._timeout,
                auto_decompress=False,
                skip_auto_headers=NOT_ADDED,
                cookie_jar=aiohttp.DummyCookieJar(),
            )
            self._sessions[loop] = session
        return session

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ASGI app for `/v1/*`: relay one request to the current upstream."""
        try:
            _inside_v1(scope)
            headers, passed = self._headers(scope["headers"])
            body = await read_body(scope, receive, self.settings.max_body_bytes)
        except ApiError as err:
            await send_error(send, err)
            return
        if body is None:
            return  # the client went away before its body arrived
        upstream = self._current
        auth = upstream.auth if self._upstream_auth is not None else passed
        if auth is not None:
            headers.append(("authorization", auth))
        upstream.in_flight += 1
        mirror = self.mirror
        ticket = mirror.ticket(scope, body) if mirror is not None else None
        if ticket is not None:  # a copy of the answer for the mirror, started once it is sent
            send = ticket.capturing(send)
        try:
            try:
                answer = await self._send(upstream, scope, headers, upstream.renamed(body))
            except ApiError as err:
                await send_error(send, err)
                return
            await relay(answer, upstream.url, receive, send)
        finally:
            upstream.in_flight -= 1
            if mirror is not None and ticket is not None:
                mirror.launch(ticket)  # after the answer's last byte: never in the user's way

    def _headers(self, raw: list[tuple[bytes, bytes]]) -> tuple[list[tuple[str, str]], str | None]:
        """The headers sent upstream but `authorization`, and the client's own `authorization`
        to pass on when the proxy has no keys of its own; ApiError 401 when the client's key
        is wrong."""
        headers, given = [], None
        for name, value in raw:
            if name == b"authorization":
                given = value
            elif name not in DROP_REQUEST:
                headers.append((name.decode("latin-1"), value.decode("latin-1")))
        if self._client_auth is not None and not hmac.compare_digest(
            given or b"", self._client_auth
        ):
            raise _bad_key("API key")
        headers.append(("accept-encoding", "identity"))
        passed = (
            given.decode("latin-1") if given is not None and self._client_auth is None else None
        )
        return headers, passed

    async def _send(
        self, upstream: Upstream, scope: Scope, headers: list[tuple[str, str]], body: bytes
    ) -> aiohttp.ClientResponse:
        path = scope.get("raw_path") or scope["path"].encode()
        url = upstream.url + path.decode("latin-1")
        if scope["query_string"]:
            url += "?" + scope["query_string"].decode("latin-1")
        target = URL(url, encoded=True)
        session = self._session()
        for attempt in (1, 2):
            try:
                return await session.request(
                    scope["method"], target, headers=headers, data=body or None,
                    allow_redirects=False,
                )  # fmt: skip
            except asyncio.TimeoutError as err:
                _LOG.warning("upstream %s timed out: %r", upstream.url, err)
                raise ApiError(
                    f"the upstream server timed out ({type(err).__name__})",
                    status=504,
                    type="upstream_error",
                    code="upstream_timeout",
                ) from None
            except (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError) as err:
                # before any response byte: a refused connect, or a pooled connection the
                # upstream closed as we reused it (its keep-alive timeout); once more, as
                # nginx's proxy_next_upstream does
                if attempt == 2:
                    raise _unreachable(upstream, err) from None
            except aiohttp.ClientError as err:
                raise _unreachable(upstream, err) from None
        raise AssertionError("unreachable")

    async def health(self) -> tuple[int, dict[str, Any]]:
        """(status, body) of `GET /health`: whether the upstream answers its /health (any
        status below 500 counts: a hosted API has no /health but is up), in-flight counts."""
        upstream = self._current.url
        body: dict[str, Any] = {"upstream": upstream, "in_flight": self.in_flight()}
        if self.mirror is not None:
            body["shadow"] = self.mirror.health()
        try:
            timeout = aiohttp.ClientTimeout(total=5.0)
            async with self._session().get(f"{upstream}/health", timeout=timeout) as answer:
                status = answer.status
        except (aiohttp.ClientError, asyncio.TimeoutError) as err:
            return 502, {**body, "status": "upstream_unreachable", "error": reason(err)}
        body["upstream_health"] = status
        if status >= 500:
            return 502, {**body, "status": "upstream_unhealthy"}
        return 200, {**body, "status": "ok"}

    async def aclose(self) -> None:
        """Close this loop's session (others' loops close theirs), and the mirror's."""
        session = self._sessions.pop(asyncio.get_running_loop(), None)
        if session is not None:
            await session.close()
        if self.mirror is not None:
            await self.mirror.aclose()


def _inside_v1(scope: Scope) -> None:
    """ApiError 400 for a path with `.` or `..` segments (raw or percent-encoded, between `/`
    or `\\`, which some servers read as `/`): forwarded as sent, `/v1/../metrics` would reach
    whatever an upstream (or a server in front of it that normalizes paths) has outside `/v1`."""
    raw = scope.get("raw_path") or scope["path"].encode()
    decoded = unquote(raw.decode("latin-1"))
    if any(part in (".", "..") for part in decoded.replace("\\", "/").split("/")):
        raise ApiError(
            "the path has '.' or '..' segments; the proxy forwards /v1/ paths only",
            status=400,
            code="invalid_path",
        )


def _unreachable(upstream: Upstream, err: Exception) -> ApiError:
    _LOG.warning("upstream %s unreachable: %s", upstream.url, reason(err))
    return ApiError(
        f"the upstream server is unreachable ({reason(err)})",
        status=502,
        type="upstream_error",
        code="upstream_unreachable",
    )


def _bad_key(what: str) -> ApiError:
    return ApiError(
        f"missing or wrong {what} (Authorization: Bearer …)", status=401, code="invalid_api_key"
    )


def check_bearer(request: Request, token: str | None, what: str) -> None:
    """ApiError 401 unless `request` carries `Authorization: Bearer <token>` (or no token)."""
    if token is None:
        return
    given = request.headers.get("authorization", "")
    if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
        raise _bad_key(what)
