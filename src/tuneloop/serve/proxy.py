"""An OpenAI-compatible reverse proxy with a switchable upstream and the traffic log.

Run: `tuneloop proxy --upstream http://127.0.0.1:8000 --port 8100 --log-dir traffic/`
(`proxy_command.py`; the routes are `proxy_app.py`; this module is the forwarding itself).
Clients talk to `http://127.0.0.1:8100/v1`; every `/v1/*` request is forwarded to the current
upstream with its body, query and headers, and the answer — JSON or a `text/event-stream` — is
relayed chunk by chunk as it arrives (httpx, keep-alive pooled; see `CLIENT_SHARDS`). With
`--log-dir` completions and `POST /v1/feedback` go to a `TrafficLog` (`traffic.py`), which is
what the flywheel trains on.

Switching. `Proxy.switch(url)` swaps the upstream in one assignment: a request picks its
upstream when it arrives and keeps it to its last byte, so requests already in flight finish
on the old server and every later one goes to the new. Each upstream counts its in-flight
requests; `await proxy.drain(old)` returns once the old one is idle, after which it may be
stopped. Another process (the flywheel watcher re-serving a new champion) does the same over
HTTP: `POST /admin/upstream {"upstream": URL}`, `GET /admin/upstream` (current + in-flight
counts), `POST /admin/drain {"upstream": URL, "timeout_s": S}`. Admin routes answer loopback
clients only, and also need `Authorization: Bearer $TOKEN` when `--admin-token-env` names one.

Errors are OpenAI-style bodies: an unreachable upstream is a 502 naming the reason (a network
error before the first response byte — a refused connect, a pooled connection the upstream
had just closed — is retried once first), a timeout a 504, a body over `--max-body-bytes` a
413. `GET /health` is 200 when the upstream's /health answers, else 502, and carries the
traffic log's health.

Deliberately different from a generic proxy: the request body is read whole (up to the cap)
before forwarding, because the log needs it and a failed connect can then be retried; the
upstream is asked for `accept-encoding: identity`, so the log reads plain JSON (a loopback hop
gains nothing from gzip); upstream URLs stay out of client-facing error messages.
"""

from __future__ import annotations

import asyncio
import hmac
import itertools
import logging
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from fastapi import Request
from fastapi.responses import Response
from starlette.types import Receive, Scope, Send

from tuneloop.errors import InputError
from tuneloop.serve.protocol import ApiError, read_capped_body

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
# ASGI and httpx give header names in lower case, as bytes
DROP_REQUEST = frozenset(
    h.encode() for h in HOP_BY_HOP | {"host", "content-length", "accept-encoding", "authorization"}
)
DROP_RESPONSE = frozenset(h.encode() for h in HOP_BY_HOP | {"date", "server"})
_LOG = logging.getLogger("tuneloop.serve.proxy")
CLIENT_SHARDS = 8
"""Connection pools (httpx transports) the upstream connections are spread over, in turn. One
pool (httpcore 1.x) scans every connection for every waiting request, so its cost grows with
the square of the concurrency: measured at c=32 on loopback, 1 pool 440 req/s, 4-32 pools
~1400 req/s. The transports are used without an `AsyncClient` around them (no cookies,
redirects, auth or default headers to merge: a proxy wants none), ~20% less CPU a request."""


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


def normalize_upstream(url: str) -> str:
    """`http(s)://host[:port][/prefix]` without a trailing `/` or `/v1`; InputError otherwise."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"upstream {url!r}: expected an http:// or https:// URL with a host")
    if parts.query or parts.fragment:
        raise InputError(f"upstream {url!r}: a base URL takes no query or fragment")
    path = parts.path.rstrip("/")
    path = path[: -len("/v1")] if path.endswith("/v1") else path
    return f"{parts.scheme}://{parts.netloc}{path}"


class Upstream:
    """One upstream base URL and the requests in flight to it (changed only on the proxy's
    event loop; read from anywhere)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.in_flight = 0


class Proxy:
    """Forwards requests to the current upstream (see module docstring)."""

    def __init__(self, settings: ProxySettings) -> None:
        self.settings = settings
        self._lock = threading.Lock()  # switch() may be called from another thread
        self._upstreams: dict[str, Upstream] = {}
        self._current = self._get(normalize_upstream(settings.upstream))
        per_shard = -(-settings.max_connections // CLIENT_SHARDS)
        limits = httpx.Limits(max_connections=per_shard, max_keepalive_connections=per_shard)
        self._pools = [httpx.AsyncHTTPTransport(limits=limits) for _ in range(CLIENT_SHARDS)]
        self._turn = itertools.count()
        read, connect = settings.read_timeout_s, settings.connect_timeout_s
        self._timeouts = {"connect": connect, "read": read, "write": read, "pool": read}
        self._health = httpx.AsyncClient(timeout=5.0)

    @property
    def upstream(self) -> str:
        return self._current.url

    def switch(self, url: str) -> str:
        """Send new requests to `url` from now on; returns the previous upstream's URL."""
        new = self._get(normalize_upstream(url))
        with self._lock:
            old, self._current = self._current, new
        _LOG.warning("upstream switched: %s → %s", old.url, new.url)
        return old.url

    def in_flight(self) -> dict[str, int]:
        """Requests in flight per upstream URL (upstreams ever used)."""
        with self._lock:
            return {u.url: u.in_flight for u in self._upstreams.values()}

    async def drain(self, url: str, timeout: float | None = None) -> bool:
        """Wait until no request is in flight to `url`; False if `timeout` passed first.

        Polls every 10 ms rather than waiting on an event, so that it works from any event
        loop or thread (a watcher need not share the proxy's loop); a drain is rare.
        """
        upstream = self._upstreams.get(normalize_upstream(url))
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while upstream is not None and upstream.in_flight > 0:
            if deadline is not None and loop.time() >= deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    def _get(self, url: str) -> Upstream:
        with self._lock:
            return self._upstreams.setdefault(url, Upstream(url))

    async def forward(self, request: Request) -> Response:
        """Relay one request to the current upstream; ApiError for what the proxy refuses."""
        check_bearer(request, self.settings.api_key, "API key")
        body = await read_capped_body(request, self.settings.max_body_bytes)
        upstream = self._current
        upstream.in_flight += 1
        try:
            answer = await self._send(upstream, request, body)
        except BaseException:
            upstream.in_flight -= 1
            raise
        return _Relay(answer, upstream)

    async def _send(self, upstream: Upstream, request: Request, body: bytes) -> httpx.Response:
        url = upstream.url + request.url.path
        if request.url.query:
            url += "?" + request.url.query
        pool = self._pools[next(self._turn) % CLIENT_SHARDS]
        built = httpx.Request(
            request.method,
            url,
            headers=self._headers(request),
            content=body,
            extensions={"timeout": self._timeouts},
        )
        for attempt in (1, 2):
            try:
                return await pool.handle_async_request(built)
            except (httpx.ConnectError, httpx.NetworkError, httpx.RemoteProtocolError) as err:
                # before any response byte: a refused connect, or a pooled connection the
                # upstream closed as we reused it (its keep-alive timeout); once more, as
                # nginx's proxy_next_upstream does
                if attempt == 2:
                    raise _unreachable(upstream, err) from None
            except httpx.TimeoutException as err:
                _LOG.warning("upstream %s timed out: %r", upstream.url, err)
                raise ApiError(
                    f"the upstream server timed out ({type(err).__name__})",
                    status=504,
                    type="upstream_error",
                    code="upstream_timeout",
                ) from None
            except httpx.HTTPError as err:
                raise _unreachable(upstream, err) from None
        raise AssertionError("unreachable")

    def _headers(self, request: Request) -> list[tuple[bytes, bytes]]:
        headers = [(k, v) for k, v in request.headers.raw if k.lower() not in DROP_REQUEST]
        key = self.settings.upstream_key
        given = request.headers.get("authorization")
        if key is not None:
            headers.append((b"authorization", f"Bearer {key}".encode()))
        elif given is not None and self.settings.api_key is None:
            headers.append((b"authorization", given.encode("latin-1")))
        headers.append((b"accept-encoding", b"identity"))
        return headers

    async def health(self) -> tuple[int, dict[str, Any]]:
        """(status, body) of `GET /health`: whether the upstream answers its /health (any
        status below 500 counts: a hosted API has no /health but is up), in-flight counts."""
        upstream = self._current.url
        body: dict[str, Any] = {"upstream": upstream, "in_flight": self.in_flight()}
        try:
            answer = await self._health.get(f"{upstream}/health")
        except httpx.HTTPError as err:
            return 502, {**body, "status": "upstream_unreachable", "error": _reason(err)}
        body["upstream_health"] = answer.status_code
        if answer.status_code >= 500:
            return 502, {**body, "status": "upstream_unhealthy"}
        return 200, {**body, "status": "ok"}

    async def aclose(self) -> None:
        for pool in self._pools:
            await pool.aclose()
        await self._health.aclose()


class _Relay(Response):
    """The upstream's answer relayed as it arrives; releases the upstream when done."""

    def __init__(self, answer: httpx.Response, upstream: Upstream) -> None:
        self.answer = answer
        self.upstream = upstream
        self.status_code = answer.status_code
        self.background = None
        self.raw_headers = [(k, v) for k, v in answer.headers.raw if k.lower() not in DROP_RESPONSE]
        content_type = answer.headers.get("content-type", "")
        self.streamed = content_type.startswith("text/event-stream")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            start = {"status": self.status_code, "headers": self.raw_headers}
            await send({"type": "http.response.start", **start})
            if self.streamed:
                await _until_disconnect(self._stream(send), receive)
            else:
                await self._whole(send)
        except httpx.HTTPError as err:
            _LOG.warning("upstream %s failed mid-response: %s", self.upstream.url, _reason(err))
            raise
        finally:
            self.upstream.in_flight -= 1
            await self.answer.aclose()

    async def _stream(self, send: Send) -> None:
        """Events go out the moment they arrive."""
        async for chunk in self.answer.aiter_raw():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _whole(self, send: Send) -> None:
        """One chunk behind, so the last bytes travel with `more_body: False`: a client has
        the whole answer only once the traffic log has registered its id."""
        held: bytes | None = None
        async for chunk in self.answer.aiter_raw():
            if held is not None:
                await send({"type": "http.response.body", "body": held, "more_body": True})
            held = chunk
        await send({"type": "http.response.body", "body": held or b"", "more_body": False})


async def _until_disconnect(pump: Any, receive: Receive) -> None:
    """Run `pump` (a coroutine), cancelling it if the client goes away: a stream nobody reads
    must not keep the upstream generating."""
    task = asyncio.ensure_future(pump)

    async def watch() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        task.cancel()

    watcher = asyncio.ensure_future(watch())
    try:
        await task
    except asyncio.CancelledError:
        if not watcher.done():
            raise  # we were cancelled ourselves, not by a disconnect
    finally:
        watcher.cancel()


def _reason(err: Exception) -> str:
    return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__


def _unreachable(upstream: Upstream, err: Exception) -> ApiError:
    _LOG.warning("upstream %s unreachable: %s", upstream.url, _reason(err))
    return ApiError(
        f"the upstream server is unreachable ({_reason(err)})",
        status=502,
        type="upstream_error",
        code="upstream_unreachable",
    )


def check_bearer(request: Request, token: str | None, what: str) -> None:
    """ApiError 401 unless `request` carries `Authorization: Bearer <token>` (or no token)."""
    if token is None:
        return
    given = request.headers.get("authorization", "")
    if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
        raise ApiError(
            f"missing or wrong {what} (Authorization: Bearer …)", status=401, code="invalid_api_key"
        )
