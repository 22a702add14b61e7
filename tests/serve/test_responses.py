"""`POST /v1/responses` (`serve/responses.py`): the translation to a chat request and back, the
400s for what has no chat equivalent, and the official openai client's `responses` calls —
text, a forced function call and its round trip, streaming — on the demo model served by the
embedded app behind the real proxy, whose traffic log records the exchanges as chat exchanges
the `openai_chat` ingester reads."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from tuneloop.data.ingest import ingest_files
from tuneloop.serve.api_error import ApiError
from tuneloop.serve.embedded.engine import Engine, load_engine
from tuneloop.serve.embedded.routes import ServerSettings, create_app
from tuneloop.serve.proxy import Proxy, ProxySettings, create_proxy_app
from tuneloop.serve.responses import as_chat_completion, chat_request
from tuneloop.serve.traffic import TrafficLog

from .upstreams import running

DEMO = Path(__file__).resolve().parents[2] / "examples" / "arith" / "model"
ADD = {
    "type": "function",
    "name": "add",
    "parameters": {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "minimum": 0, "maximum": 99},
            "b": {"type": "integer", "minimum": 0, "maximum": 99},
        },
        "required": ["a", "b"],
        "additionalProperties": False,
    },
}


def test_a_responses_request_is_the_chat_request_it_amounts_to() -> None:
    body = {
        "model": "m",
        "instructions": "Be brief.",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "2+3?"}]},
            {"type": "function_call", "call_id": "c1", "name": "add", "arguments": '{"a":2}'},
            {"type": "function_call", "call_id": "c2", "name": "add", "arguments": '{"b":3}'},
            {"type": "function_call_output", "call_id": "c1", "output": "5"},
        ],
        "tools": [ADD],
        "tool_choice": {"type": "function", "name": "add"},
        "max_output_tokens": 9,
        "text": {"format": {"type": "json_schema", "name": "n", "schema": {"type": "object"}}},
        "include": ["message.output_text.logprobs"],
        "store": False,
    }
    chat = chat_request(body)
    assert chat["messages"][0] == {"role": "system", "content": "Be brief."}
    assert chat["messages"][1] == {"role": "user", "content": "2+3?"}
    calls = chat["messages"][2]["tool_calls"]
    assert [c["id"] for c in calls] == ["c1", "c2"]  # consecutive calls: one assistant turn
    assert chat["messages"][3] == {"role": "tool", "tool_call_id": "c1", "content": "5"}
    assert chat["tools"][0]["function"]["name"] == "add"
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "add"}}
    assert chat["max_tokens"] == 9 and chat["logprobs"] is True
    assert chat["response_format"]["json_schema"]["schema"] == {"type": "object"}


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"input": [{"type": "reasoning", "summary": []}]}, "input.0.type"),
        ({"input": [{"type": "item_reference", "id": "x"}]}, "input.0.type"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image"}]}]},
            "input.0.content.0.type",
        ),
        ({"input": [{"role": "robot", "content": "x"}]}, "input.0.role"),
        ({"input": "x", "tools": [{"type": "web_search"}]}, "tools.0.type"),
        ({"input": "x", "previous_response_id": "resp_1"}, "previous_response_id"),
        ({"input": "x", "text": {"format": {"type": "yaml"}}}, "text.format.type"),
        ({"input": "x", "reasoning": {"effort": "high"}}, "reasoning"),
        ({}, "input"),
    ],
)
def test_what_has_no_chat_equivalent_is_a_400_naming_it(extra: dict[str, Any], param: str) -> None:
    with pytest.raises(ApiError) as info:
        chat_request({"model": "m", **extra})
    assert info.value.status == 400 and info.value.param == param


def test_a_response_reads_back_as_its_chat_completion() -> None:
    response = {
        "id": "resp_1",
        "created_at": 1,
        "model": "m",
        "status": "completed",
        "output": [
            {"type": "message", "content": [{"type": "output_text", "text": "Hi"}]},
            {"type": "function_call", "call_id": "c1", "name": "add", "arguments": "{}"},
        ],
        "usage": {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5},
    }
    chat = as_chat_completion(response)
    assert chat["id"] == "resp_1" and chat["choices"][0]["finish_reason"] == "tool_calls"
    assert chat["choices"][0]["message"]["content"] == "Hi"
    assert chat["usage"] == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}


@pytest.fixture(scope="module")
def demo() -> Iterator[Engine]:
    engine = load_engine(DEMO, max_batch_size=8, batch_wait_ms=1).start()
    yield engine
    engine.close()


async def test_the_openai_client_speaks_responses_through_the_proxy(
    demo: Engine, tmp_path: Path
) -> None:
    log = TrafficLog(tmp_path)
    with (
        running(create_app(demo, "model", ServerSettings())) as server,
        running(create_proxy_app(Proxy(ProxySettings(upstream=server)), log)) as proxy,
    ):
        client = openai.AsyncOpenAI(base_url=f"{proxy}/v1", api_key="unused", max_retries=0)
        text = await client.responses.create(
            model="model", input="12+3=", instructions="Add.", max_output_tokens=8, temperature=0
        )
        forced = await client.responses.create(
            model="model", input="12+3=", tools=[ADD], tool_choice="required",  # type: ignore[list-item]
            max_output_tokens=64, temperature=0,
        )  # fmt: skip
        [call] = forced.output
        assert call.type == "function_call" and call.name == "add"
        answered = await client.responses.create(
            model="model",
            input=[
                {"role": "user", "content": "12+3="},
                {"type": "function_call", "call_id": call.call_id, "name": "add",
                 "arguments": call.arguments},
                {"type": "function_call_output", "call_id": call.call_id, "output": "15"},
            ],  # type: ignore[list-item]
            max_output_tokens=8,
            temperature=0,
        )  # fmt: skip
        events = []
        async with client.responses.stream(
            model="model", input="12+3=", max_output_tokens=8, temperature=0
        ) as stream:
            async for event in stream:
                events.append(event.type)
            streamed = await stream.get_final_response()
    log.close()
    assert text.status in ("completed", "incomplete") and text.output_text
    assert text.usage is not None and text.usage.output_tokens >= 1
    assert json.loads(call.arguments).keys() == {"a", "b"}
    assert answered.output_text
    assert events[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert "response.output_text.delta" in events and events[-1].startswith("response.")
    assert streamed.output_text == "5"  # the demo model's greedy answer to "12+3="
    traces, rejects, _ = ingest_files("openai_chat", [log.path])
    assert rejects == [] and len(traces) == 4
    assert traces[0].messages[0].content == "Add."  # instructions: the system turn


def test_chat_chunks_become_the_responses_events_in_order() -> None:
    from tuneloop.serve.responses import ResponseStream

    def types(events: list[bytes]) -> list[str]:
        return [e.split(b"\n")[0].removeprefix(b"event: ").decode() for e in events]

    stream = ResponseStream({"model": "m"}, "resp_1", "m")
    call = {"index": 0, "id": "c1", "function": {"name": "add", "arguments": "{}"}}
    events = stream.start()
    events += stream.chunk({"choices": [{"delta": {"content": "Hi"}}]})
    events += stream.chunk({"choices": [{"delta": {"tool_calls": [call]}}]})
    events += stream.chunk({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]})
    events += stream.finish()
    assert types(events) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    numbers = [json.loads(e.split(b"data: ", 1)[1])["sequence_number"] for e in events]
    assert numbers == list(range(len(events)))
    assert [item["type"] for item in stream.response["output"]] == ["message", "function_call"]
    failed = ResponseStream({"model": "m"}, "resp_2", "m")
    assert types(failed.chunk({"choices": [], "error": {"message": "boom"}})) == ["response.failed"]
    assert failed.finish() == []  # one terminal event
