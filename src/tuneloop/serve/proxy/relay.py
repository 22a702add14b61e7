"""The ASGI side of one forwarded exchange: the capped request body in, the upstream's
answer relayed out as it arrives, OpenAI-style error bodies.

Used by `Proxy.handle` (`forward.py`, which says what the proxy does and why). Plain ASGI
messages, no framework objects: a proxy's cost per request is what it adds.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import aiohttp
from starlette.types import Message, Receive, Scope, Send

from tuneloop.serve.api_error import ApiError

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
DROP_RESPONSE = frozenset(h.encode() for h in HOP_BY_HOP | {"date", "server"})
_LOG = logging.getLogger("tuneloop.serve.proxy")


async def read_body(scope: Scope, receive: Receive, limit: int) -> bytes | None:
    """The request body, refusing early once it exceeds `limit`; None on a disconnect."""
    for name, value in scope["headers"]:
        if name == b"content-length" and value.isdigit() and int(value) > limit:
            raise too_large(f"request body is {value.decode()} bytes; the limit is {limit}")
    chunks: list[bytes] = []
    size, more = 0, True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise too_large(f"request body exceeds {limit} bytes")
        chunks.append(chunk)
        more = message.get("more_body", False)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def relay(answer: aiohttp.ClientResponse, url: str, receive: Receive, send: Send) -> None:
    """The upstream's answer relayed as it arrives; the connection goes back to the pool
    once read to the end, and is closed otherwise (a client gone, an upstream failing)."""
    headers = [
        (name.lower(), value)
        for name, value in answer.raw_headers
        if name.lower() not in DROP_RESPONSE
    ]
    streamed = answer.content_type == "text/event-stream"
    try:
        await send({"type": "http.response.start", "status": answer.status, "headers": headers})
        if streamed:
            await _until_disconnect(_stream(answer, send), receive)
        else:
            await _whole(answer, send)
    except (aiohttp.ClientError, asyncio.TimeoutError) as err:
        _LOG.warning("upstream %s failed mid-response: %s", url, reason(err))
        answer.close()
        raise
    except BaseException:
        answer.close()
        raise
    if answer.content.at_eof():
        answer.release()
    else:
        answer.close()  # a stream cut short by its client


async def _stream(answer: aiohttp.ClientResponse, send: Send) -> None:
    """Events go out the moment they arrive."""
    async for chunk in answer.content.iter_any():
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _whole(answer: aiohttp.ClientResponse, send: Send) -> None:
    """One chunk behind, so the last bytes travel with `more_body: False`: a client has the
    whole answer only once the traffic log has registered its id."""
    held: bytes | None = None
    async for chunk in answer.content.iter_any():
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


async def send_error(send: Send, err: ApiError) -> None:
    """`err` as a whole OpenAI-style JSON response."""
    body = json.dumps(err.body()).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    start: Message = {"type": "http.response.start", "status": err.status, "headers": headers}
    await send(start)
    await send({"type": "http.response.body", "body": body})


def reason(err: BaseException) -> str:
    """What went wrong, without the upstream's address (clients see this)."""
    if isinstance(err, aiohttp.ClientConnectorError):
        return f"ConnectError: {err.os_error.strerror or type(err.os_error).__name__}"
    return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__


def too_large(message: str) -> ApiError:
    return ApiError(message, status=413, code="request_too_large")
