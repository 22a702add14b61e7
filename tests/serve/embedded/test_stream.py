"""Streaming and tool calling through the official openai client (sync and async) against real
embedded server processes: one over the random tiny model (long, deterministic completions),
one over `toolmodel.py`'s tiny model that answers every chat with a `<tool_call>`."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tuneloop.config import ServeConfig
from tuneloop.endpoint import Endpoint
from tuneloop.serving import serving

from .toolmodel import TOOLS, build_tool_model

QUESTION = [{"role": "user", "content": "What is 2 + 3?"}]


@pytest.fixture(scope="module")
def tiny_server(tiny_model: Path) -> Iterator[Endpoint]:
    with serving(tiny_model, ServeConfig(max_tokens_cap=900, startup_timeout_s=120)) as ep:
        yield ep


@pytest.fixture(scope="module")
def tool_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    model = build_tool_model(tmp_path_factory.mktemp("tool-model"))
    with serving(model, ServeConfig(max_tokens_cap=64, startup_timeout_s=120)) as ep:
        yield ep


def _client(ep: Endpoint) -> openai.OpenAI:
    return openai.OpenAI(base_url=ep.base_url, api_key="unused")


def _streamed(chunks: Any) -> tuple[dict[int, str], dict[int, str], list[Any]]:
    """(text per choice, finish reason per choice, every chunk) of a chat stream."""
    texts: dict[int, str] = {}
    reasons: dict[int, str] = {}
    seen = list(chunks)
    for chunk in seen:
        for choice in chunk.choices:
            texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
            if choice.finish_reason:
                reasons[choice.index] = choice.finish_reason
    return texts, reasons, seen


def test_a_streamed_chat_is_the_plain_answer_in_pieces_with_usage_last(
    tiny_server: Endpoint,
) -> None:
    client = _client(tiny_server)
    args: dict[str, Any] = {
        "model": tiny_server.model,
        "messages": QUESTION,
        "n": 2,
        "temperature": 0.9,
        "seed": 11,
        "max_tokens": 40,
    }
    plain = client.chat.completions.create(**args)
    stream = client.chat.completions.create(
        **args, stream=True, stream_options={"include_usage": True}
    )
    texts, reasons, chunks = _streamed(stream)
    assert texts == {c.index: c.message.content for c in plain.choices}
    assert reasons == {0: "length", 1: "length"}
    assert len(chunks) > 10  # it really came in pieces
    assert all(c.usage is None for c in chunks[:-1]) and chunks[-1].choices == []
    assert chunks[-1].usage == plain.usage
    assert {c.id for c in chunks} == {chunks[0].id}


def test_a_streamed_text_completion_honours_stop_strings(tiny_server: Endpoint) -> None:
    client = _client(tiny_server)
    args: dict[str, Any] = {"model": tiny_server.model, "prompt": "ab", "temperature": 0}
    full = client.completions.create(**args, max_tokens=12).choices[0].text
    stop = full[5:7]
    plain = client.completions.create(**args, max_tokens=12, stop=[stop]).choices[0]
    pieces = list(client.completions.create(**args, max_tokens=12, stop=[stop], stream=True))
    assert "".join(c.choices[0].text for c in pieces) == plain.text == full[: full.find(stop)]
    assert pieces[-1].choices[0].finish_reason == "stop"


async def test_the_async_client_streams_concurrent_requests(tiny_server: Endpoint) -> None:
    client = openai.AsyncOpenAI(base_url=tiny_server.base_url, api_key="unused")

    async def one(i: int) -> tuple[str, str]:
        args = {"model": tiny_server.model, "messages": QUESTION, "temperature": 0}
        plain = await client.chat.completions.create(**args, max_tokens=5 + i)
        text = ""
        async for chunk in await client.chat.completions.create(
            **args, max_tokens=5 + i, stream=True
        ):
            text += "".join(c.delta.content or "" for c in chunk.choices)
        return text, plain.choices[0].message.content or ""

    pairs = await asyncio.gather(*(one(i) for i in range(6)))
    assert all(streamed == plain for streamed, plain in pairs)
    await client.close()


def test_a_client_that_disconnects_frees_its_slot(tiny_server: Endpoint) -> None:
    health = tiny_server.base_url.removesuffix("/v1") + "/health"
    before = httpx.get(health).json()["cancelled"]
    stream = _client(tiny_server).chat.completions.create(
        model=tiny_server.model, messages=QUESTION, temperature=0, max_tokens=900, stream=True
    )
    for i, _ in enumerate(stream):
        if i == 3:
            break
    stream.close()  # drop the connection with ~900 tokens still to go
    deadline = time.monotonic() + 60
    while (state := httpx.get(health).json())["running"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert state["running"] == 0 and state["cancelled"] == before + 1


def test_tools_the_model_does_not_call_come_back_as_raw_text(tiny_server: Endpoint) -> None:
    reply = _client(tiny_server).chat.completions.create(
        model=tiny_server.model, messages=QUESTION, tools=TOOLS, temperature=0, max_tokens=8
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "length" and choice.message.tool_calls is None
    assert reply.usage is not None and reply.usage.prompt_tokens > 400  # the tools block


def test_a_tool_call_comes_back_as_openai_tool_calls(tool_server: Endpoint) -> None:
    reply = _client(tool_server).chat.completions.create(
        model=tool_server.model, messages=QUESTION, tools=TOOLS, temperature=0
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Let me add."
    (call,) = choice.message.tool_calls or []
    assert call.type == "function" and call.id.startswith("call_")
    assert (call.function.name, json.loads(call.function.arguments)) == ("add", {"a": 2, "b": 3})


def test_a_streamed_tool_call_arrives_whole(tool_server: Endpoint) -> None:
    stream = _client(tool_server).chat.completions.create(
        model=tool_server.model, messages=QUESTION, tools=TOOLS, temperature=0, stream=True
    )
    chunks = list(stream)
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    calls = [t for c in chunks if c.choices for t in c.choices[0].delta.tool_calls or []]
    assert content == "Let me add."  # the <tool_call> text itself is never streamed as content
    assert [(t.index, t.function.name, json.loads(t.function.arguments)) for t in calls] == [
        (0, "add", {"a": 2, "b": 3})
    ]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_tool_turns_render_and_tool_choice_none_reads_no_calls(tool_server: Endpoint) -> None:
    client = _client(tool_server)
    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2}'}}
    conversation = [
        *QUESTION,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "5"},
    ]
    again = client.chat.completions.create(
        model=tool_server.model, messages=conversation, tools=TOOLS, temperature=0
    )
    assert again.choices[0].finish_reason == "tool_calls"
    plain = client.chat.completions.create(
        model=tool_server.model, messages=QUESTION, tools=TOOLS, tool_choice="none", temperature=0
    )
    assert plain.choices[0].finish_reason == "stop" and plain.choices[0].message.tool_calls is None
    assert "<tool_call>" in (plain.choices[0].message.content or "")


def test_a_tools_list_that_is_not_json_schema_is_a_400_naming_the_field(
    tool_server: Endpoint,
) -> None:
    bad = [{"type": "function", "function": {"name": "add", "parameters": {"type": "objekt"}}}]
    with pytest.raises(openai.BadRequestError) as info:
        _client(tool_server).chat.completions.create(
            model=tool_server.model,
            messages=QUESTION,
            tools=bad,  # type: ignore[list-item]
        )
    assert info.value.status_code == 400
    error = info.value.response.json()["error"]
    assert error["param"] == "tools.0.function.parameters" and "JSON Schema" in error["message"]
