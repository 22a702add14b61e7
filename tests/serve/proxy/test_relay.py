"""The proxy's ASGI side: reading a capped request body from plain ASGI messages."""

from __future__ import annotations

from typing import Any

import pytest

from tuneloop.serve.api_error import ApiError
from tuneloop.serve.proxy.relay import read_body


def receiver(*messages: dict[str, Any]) -> Any:
    queue = list(messages)

    async def receive() -> dict[str, Any]:
        return queue.pop(0)

    return receive


def scope(length: int | None = None) -> dict[str, Any]:
    headers = [] if length is None else [(b"content-length", str(length).encode())]
    return {"type": "http", "headers": headers}


async def test_a_body_in_parts_is_joined() -> None:
    parts = receiver(
        {"type": "http.request", "body": b"ab", "more_body": True},
        {"type": "http.request", "body": b"cd"},
    )
    assert await read_body(scope(), parts, limit=4) == b"abcd"


async def test_a_declared_length_over_the_cap_is_refused_before_reading() -> None:
    with pytest.raises(ApiError) as refused:
        await read_body(scope(length=5), receiver(), limit=4)  # nothing to receive
    assert refused.value.status == 413 and "5 bytes" in refused.value.message


async def test_an_undeclared_body_over_the_cap_is_refused_once_past_it() -> None:
    parts = receiver(
        {"type": "http.request", "body": b"abc", "more_body": True},
        {"type": "http.request", "body": b"de", "more_body": True},
    )
    with pytest.raises(ApiError) as refused:
        await read_body(scope(), parts, limit=4)
    assert refused.value.status == 413 and refused.value.code == "request_too_large"


async def test_a_client_gone_mid_body_reads_as_none() -> None:
    parts = receiver(
        {"type": "http.request", "body": b"a", "more_body": True}, {"type": "http.disconnect"}
    )
    assert await read_body(scope(), parts, limit=4) is None
