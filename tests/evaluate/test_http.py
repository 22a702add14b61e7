"""The lean HTTP/1.1 pool: framing variants, connection reuse, and failures as TransportFailure."""

from __future__ import annotations

import asyncio

import pytest

from tuneloop.client.http import Http11Pool, HttpxTransport, TransportFailure, transport_for

BODY = b'{"ok": true}'


async def canned_server(replies: list[bytes]) -> tuple[asyncio.AbstractServer, int, list[int]]:
    """Answers each request on a connection with the next canned reply (then closes if the
    reply list says so); records how many connections were opened."""
    opened: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        opened.append(1)
        try:
            while replies:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
                reply = replies.pop(0)
                if reply == b"CLOSE":
                    break
                writer.write(reply)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], opened


def ok(body: bytes = BODY, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)


CHUNKED = (
    b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"ok"\r\n7\r\n: true}\r\n0\r\n\r\n'
)


async def test_keep_alive_chunked_and_close_framing() -> None:
    server, port, opened = await canned_server(
        [ok(), CHUNKED, ok(extra=b"Connection: close\r\n"), ok()]
    )
    async with Http11Pool(f"http://127.0.0.1:{port}/v1", timeout_s=5, headers={}) as pool:
        for _ in range(4):
            status, headers, data = await pool.post("/chat/completions", b"{}")
            assert (status, data) == (200, BODY)
    assert len(opened) == 2  # reused until the server said Connection: close
    server.close()


async def test_eof_framed_body_and_status_codes() -> None:
    server, port, _ = await canned_server([b"HTTP/1.0 503 Busy\r\n\r\nlater"])
    async with Http11Pool(f"http://127.0.0.1:{port}", timeout_s=5, headers={}) as pool:
        assert await pool.post("/x", b"{}") == (503, {}, b"later")
    server.close()


@pytest.mark.parametrize(
    "reply",
    [
        b"CLOSE",  # connection closed before any response
        b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\nshort",  # EOF mid-body
        b"garbage\r\n\r\n",  # not a status line
        b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n",  # over the body cap
    ],
)
async def test_broken_responses_are_transport_failures(reply: bytes) -> None:
    server, port, _ = await canned_server([reply])
    async with Http11Pool(f"http://127.0.0.1:{port}", timeout_s=5, headers={}) as pool:
        with pytest.raises(TransportFailure):
            await pool.post("/x", b"{}")
    server.close()


async def test_refused_connection_and_timeout() -> None:
    server, port, _ = await canned_server([])
    server.close()
    await server.wait_closed()
    with pytest.raises(TransportFailure, match="connect"):
        await Http11Pool(f"http://127.0.0.1:{port}", timeout_s=5, headers={}).post("/x", b"{}")

    async def never(reader, writer):  # accepts and says nothing
        await asyncio.sleep(10)

    hang = await asyncio.start_server(never, "127.0.0.1", 0)
    port3 = hang.sockets[0].getsockname()[1]
    with pytest.raises(TransportFailure, match="timed out"):
        await Http11Pool(f"http://127.0.0.1:{port3}", timeout_s=0.2, headers={}).post("/x", b"{}")
    hang.close()


async def test_httpx_transport_for_other_schemes(fake_server) -> None:
    assert isinstance(
        transport_for("https://api.example.com/v1", timeout_s=1, headers={}, concurrency=2),
        HttpxTransport,
    )
    transport = HttpxTransport(fake_server.url + "/v1", timeout_s=5, headers={}, concurrency=2)
    async with transport:
        body = b'{"model": "m", "messages": [{"role": "user", "content": "What is 1 + 2?"}]}'
        status, _, data = await transport.post("/chat/completions", body)
    assert status == 200 and b"The answer is" in data


async def test_connection_closed_while_idle_is_reopened_transparently() -> None:
    server, port, opened = await canned_server([ok(), b"CLOSE", ok()])
    async with Http11Pool(f"http://127.0.0.1:{port}", timeout_s=5, headers={}) as pool:
        assert (await pool.post("/x", b"{}"))[0] == 200
        assert (await pool.post("/x", b"{}"))[0] == 200  # first try hit the closed connection
    assert len(opened) == 2
    server.close()
