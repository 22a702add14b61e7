"""Transports for the eval client: a lean HTTP/1.1 keep-alive pool for `http://` endpoints,
and httpx for everything else (`https://`, proxies).

    async with transport_for("http://127.0.0.1:8000", timeout_s=60, headers={}) as t:
        status, headers, body = await t.post("/v1/chat/completions", b"{...}")

Why not httpx for everything: on the 2-CPU box this was built on, an httpx.AsyncClient
posting small JSON requests to a local server at concurrency 32 managed ~150-400 requests/s
(its connection pool rescans every connection per request, and anyio/h11 add more per
request), aiohttp ~3-5k/s, and a bare asyncio-streams loop ~13-15k/s
(`benchmarks/eval_client.py`). The eval client is the hot path of every loop iteration, and
local OpenAI-compatible servers (the embedded server, vLLM, Ollama) speak plain HTTP/1.1 with
Content-Length or chunked bodies, which is all this pool implements. Deliberately out of scope
here (they go through httpx): TLS, proxies, redirects, HTTP/2, compression.

Every failure to get a complete response — refused or reset connections, EOF mid-response,
timeouts, unparseable framing — raises `TransportFailure`, which the client retries.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable
from typing import Any, TypeVar
from urllib.parse import urlsplit

MAX_BODY = 64 << 20
"""Largest response body accepted (an untrusted server must not exhaust our memory)."""


T = TypeVar("T")


async def _within(aw: Awaitable[T], seconds: float) -> T:
    """`await aw` with a timeout; asyncio.timeout (3.11+) avoids wait_for's extra task."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(seconds):
            return await aw
    return await asyncio.wait_for(aw, seconds)


class TransportFailure(Exception):
    """No complete HTTP response (connection, timeout or framing): retryable."""


Response = tuple[int, dict[str, str], bytes]
_Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class _Stale(Exception):
    """The connection was closed or reset before any byte of a response arrived."""


class Http11Pool:
    """Keep-alive connections to one plain-HTTP origin; one connection per request in flight.

    Connections are taken from an idle list and returned after a complete response, so the
    number open never exceeds the caller's concurrency. A connection that fails is dropped.
    A request on a reused connection that the server had closed while it sat idle (reset or
    EOF before any response byte) is sent once more on a fresh connection, as urllib3 and
    httpcore do, so keep-alive expiry never costs a retry or a sample.
    """

    def __init__(self, base_url: str, *, timeout_s: float, headers: dict[str, str]) -> None:
        parts = urlsplit(base_url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.prefix = parts.path.rstrip("/")
        self.timeout_s = timeout_s
        # the Host header never carries `user:password@` from the URL
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self._head = (
            f"Host: {parts.netloc.rpartition('@')[2]}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json\r\nUser-Agent: tuneloop\r\n{extra}"
        ).encode()
        self._idle: list[_Conn] = []

    async def __aenter__(self) -> Http11Pool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for _, writer in self._idle:
            writer.close()
        self._idle.clear()

    async def post(self, path: str, body: bytes) -> Response:
        if self._idle:
            try:
                return await self._roundtrip(self._idle.pop(), path, body)
            except _Stale:
                pass  # the server closed it while idle; the request never reached it
        try:
            conn = await _within(asyncio.open_connection(self.host, self.port), self.timeout_s)
        except (OSError, asyncio.TimeoutError) as err:
            raise TransportFailure(
                f"connect to {self.host}:{self.port}: {_describe(err)}"
            ) from None
        try:
            return await self._roundtrip(conn, path, body)
        except _Stale as err:
            raise TransportFailure(f"POST {self.prefix}{path}: {err}") from None

    async def _roundtrip(self, conn: _Conn, path: str, body: bytes) -> Response:
        # The timeout is a watchdog that aborts the socket, rather than asyncio.timeout or
        # wait_for around the exchange: a timer handle per request is several times cheaper,
        # and this is the per-request hot path.
        fired: list[bool] = []

        def expire() -> None:
            fired.append(True)
            conn[1].transport.abort()

        watchdog = asyncio.get_running_loop().call_later(self.timeout_s, expire)
        try:
            status, headers, data, keep = await self._exchange(conn, path, body)
        except _Stale:
            conn[1].close()
            if fired:
                raise TransportFailure(f"POST {self.prefix}{path}: timed out") from None
            raise
        except (
            OSError,
            EOFError,
            asyncio.TimeoutError,
            asyncio.LimitOverrunError,
            ValueError,
        ) as err:
            conn[1].close()
            reason = "timed out" if fired else _describe(err)
            raise TransportFailure(f"POST {self.prefix}{path}: {reason}") from None
        except BaseException:  # cancelled mid-exchange: the connection's state is unknown
            conn[1].close()
            raise
        finally:
            watchdog.cancel()
        if keep:
            self._idle.append(conn)
        else:
            conn[1].close()
        return status, headers, data

    async def _exchange(
        self, conn: _Conn, path: str, body: bytes
    ) -> tuple[int, dict[str, str], bytes, bool]:
        reader, writer = conn
        request = b"POST %s%s HTTP/1.1\r\n%sContent-Length: %d\r\n\r\n" % (
            self.prefix.encode(),
            path.encode(),
            self._head,
            len(body),
        )
        try:
            writer.write(request + body)
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
        except (ConnectionResetError, BrokenPipeError) as err:
            raise _Stale(_describe(err)) from None
        except asyncio.IncompleteReadError as err:
            if err.partial:
                raise
            raise _Stale("connection closed before any response") from None
        status_line, *lines = head[:-4].decode("latin-1").split("\r\n")
        version, code = status_line.split(" ", 2)[:2]
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        data = await _read_body(reader, headers)
        keep = (
            version == "HTTP/1.1"
            and headers.get("connection", "").lower() != "close"
            and ("content-length" in headers or "chunked" in headers.get("transfer-encoding", ""))
        )
        return int(code), headers, data, keep


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        chunks: list[bytes] = []
        total = 0
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
            if size == 0:
                while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers
                    pass
                return b"".join(chunks)
            total += size
            if total > MAX_BODY:
                raise ValueError(f"response body over {MAX_BODY} bytes")
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)
    if "content-length" in headers:
        length = int(headers["content-length"])
        if not 0 <= length <= MAX_BODY:
            raise ValueError(f"content-length {length} out of range")
        return await reader.readexactly(length)
    data = await reader.read(MAX_BODY + 1)  # framed by connection close
    if len(data) > MAX_BODY:
        raise ValueError(f"response body over {MAX_BODY} bytes")
    return data


def _describe(err: BaseException) -> str:
    if isinstance(err, asyncio.TimeoutError):
        return "timed out"
    if isinstance(err, asyncio.IncompleteReadError):
        return "connection closed mid-response"
    return f"{type(err).__name__}: {err}"[:200]


class HttpxTransport:
    """httpx for https, proxies and anything the lean pool does not speak."""

    def __init__(
        self, base_url: str, *, timeout_s: float, headers: dict[str, str], concurrency: int
    ) -> None:
        self.base = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.headers = {"Content-Type": "application/json", **headers}
        self.concurrency = concurrency
        self._client: Any = None

    async def __aenter__(self) -> HttpxTransport:
        import httpx

        self._client = httpx.AsyncClient(
            headers=self.headers,
            timeout=httpx.Timeout(self.timeout_s),
            limits=httpx.Limits(
                max_connections=self.concurrency, max_keepalive_connections=self.concurrency
            ),
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._client.aclose()

    async def post(self, path: str, body: bytes) -> Response:
        import httpx

        try:
            response = await self._client.post(self.base + path, content=body)
            data = await response.aread()
        except httpx.TransportError as err:
            raise TransportFailure(f"{type(err).__name__}: {err}"[:300]) from None
        return response.status_code, dict(response.headers), data


def transport_for(
    base_url: str, *, timeout_s: float, headers: dict[str, str], concurrency: int
) -> Http11Pool | HttpxTransport:
    """The lean pool for plain `http://` without a proxy, httpx otherwise."""
    from urllib.request import getproxies, proxy_bypass

    parts = urlsplit(base_url)
    proxied = "http" in getproxies() and not proxy_bypass(parts.hostname or "")
    if parts.scheme == "http" and not proxied:
        return Http11Pool(base_url, timeout_s=timeout_s, headers=headers)
    return HttpxTransport(base_url, timeout_s=timeout_s, headers=headers, concurrency=concurrency)
