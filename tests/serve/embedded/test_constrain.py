"""Constrained decoding on the demo model (examples/arith/model, in-process): `response_format`
JSON a schema the model would not follow on its own, forced tool calls from a model that never
calls tools, and the 400s a bad format gets (`constrain.py`, `tools.forced_call`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from tuneloop.serve.embedded.engine import Engine, load_engine
from tuneloop.serve.embedded.routes import ServerSettings, create_app

from .test_tools import ADD

DEMO = Path(__file__).resolve().parents[3] / "examples" / "arith" / "model"
NAME = "model"
ANSWER = {
    "type": "object",
    "properties": {
        "answer": {"type": "integer", "minimum": 0, "maximum": 999},
        "unit": {"enum": ["apples", "pears"]},
    },
    "required": ["answer", "unit"],
    "additionalProperties": False,
}
MUL = {"type": "function", "function": {"name": "mul", "parameters": {"type": "object"}}}


@pytest.fixture(scope="module")
def demo() -> Iterator[Engine]:
    engine = load_engine(DEMO, max_batch_size=8, batch_wait_ms=1).start()
    yield engine
    engine.close()


async def chat(engine: Engine, **extra: Any) -> httpx.Response:
    body = {
        "model": NAME,
        "messages": [{"role": "user", "content": "12+3="}],
        "max_tokens": 64,
        "temperature": 0,
        **extra,
    }
    app = create_app(engine, NAME, ServerSettings())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=120) as c:
        return await c.post("/v1/chat/completions", json=body)


def contents(answer: httpx.Response) -> list[str]:
    assert answer.status_code == 200, answer.text
    return [choice["message"]["content"] for choice in answer.json()["choices"]]


async def test_json_schema_output_is_valid_where_the_model_alone_is_not(demo: Engine) -> None:
    schema = {"type": "json_schema", "json_schema": {"name": "answer", "schema": ANSWER}}
    free = contents(await chat(demo))
    assert free == ["5"]  # what the demo model writes for "12+3=" on its own
    greedy = contents(await chat(demo, response_format=schema))
    sampled = contents(await chat(demo, response_format=schema, temperature=1.0, n=4, seed=3))
    for text in greedy + sampled:
        jsonschema.validate(json.loads(text), ANSWER)
    assert greedy[0].startswith('{"answer":')  # compact: no whitespace to fill
    obj = contents(await chat(demo, response_format={"type": "json_object"}, max_tokens=8))
    assert obj[0].startswith("{")  # an object begins; 8 tokens do not finish it


async def test_a_forced_call_is_a_valid_call_from_a_model_that_never_calls(demo: Engine) -> None:
    auto = (await chat(demo, tools=[ADD, MUL], tool_choice="auto")).json()["choices"][0]
    assert auto["finish_reason"] == "stop" and "tool_calls" not in auto["message"]
    named = {"type": "function", "function": {"name": "add"}}
    for choice, names in (("required", {"add", "mul"}), (named, {"add"})):
        answer = (await chat(demo, tools=[ADD, MUL], tool_choice=choice, max_tokens=96)).json()
        picked = answer["choices"][0]
        assert picked["finish_reason"] == "tool_calls", picked
        [call] = picked["message"]["tool_calls"]
        assert call["function"]["name"] in names
        tool = ADD if call["function"]["name"] == "add" else MUL
        jsonschema.validate(
            json.loads(call["function"]["arguments"]), tool["function"]["parameters"]
        )


async def test_a_streamed_forced_call_arrives_whole(demo: Engine) -> None:
    named = {"type": "function", "function": {"name": "add"}}
    answer = await chat(demo, tools=[ADD], tool_choice=named, max_tokens=96, stream=True)
    events = [json.loads(line[6:]) for line in answer.text.splitlines() if line[:7] == "data: {"]
    deltas = [e["choices"][0]["delta"] for e in events if e["choices"]]
    assert "".join(d.get("content") or "" for d in deltas) == ""
    calls = [call for d in deltas for call in d.get("tool_calls") or []]
    assert [c["function"]["name"] for c in calls] == ["add"]
    jsonschema.validate(
        json.loads(calls[0]["function"]["arguments"]), ADD["function"]["parameters"]
    )
    assert events[-1]["choices"][0]["finish_reason"] == "tool_calls"


@pytest.mark.parametrize(
    ("response_format", "param"),
    [
        ({"type": "yaml"}, "response_format.type"),
        ({"type": "json_schema"}, "response_format"),
        (
            {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "objekt"}}},
            "response_format.json_schema.schema",
        ),
        (  # valid JSON Schema, but a keyword no grammar engine here implements
            {"type": "json_schema", "json_schema": {"name": "a", "schema": {"not": {}}}},
            "response_format.json_schema.schema",
        ),
    ],
)
async def test_a_format_that_cannot_be_enforced_is_a_400_naming_it(
    demo: Engine, response_format: dict[str, Any], param: str
) -> None:
    answer = await chat(demo, response_format=response_format)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == param
