"""json scorer: validity, schema, value equality and tool calls."""

from __future__ import annotations

import json

from tuneloop.registry import scorers

score = scorers.get("json")()

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name", "age"],
}


def test_validity_and_extraction() -> None:
    assert score({}, 'Here you go: {"a": 1} hope it helps').value == 1.0
    assert score({}, "```json\n[1, 2]\n```").value == 1.0
    assert score({}, "{not json").detail["reason"] == "no valid JSON in completion"


def test_schema() -> None:
    assert score({"schema": SCHEMA}, '{"name": "Ann", "age": 3}').value == 1.0
    bad = score({"schema": SCHEMA}, '{"name": "Ann", "age": -1}')
    assert bad.value == 0.0 and bad.detail["reason"].startswith("schema")
    assert score({"schema": {"type": "bogus"}}, "{}").detail["reason"].startswith("item schema")


def test_answer_equality() -> None:
    assert score({"answer": '{"x": [1, 2]}'}, '{"x": [1, 2]}').value == 1.0
    assert score({"answer": {"x": 1}}, '{"x": 2}').value == 0.0


def test_tool_calls() -> None:
    want = {"tool_call": {"name": "get_weather", "arguments": {"city": "Oslo"}}}
    openai_style = {"name": "get_weather", "arguments": json.dumps({"city": "Oslo"})}
    assert score(want, json.dumps(openai_style)).value == 1.0
    assert score(want, json.dumps({"function": openai_style})).value == 1.0
    wrong_name = score(want, '{"name": "get_time", "arguments": {"city": "Oslo"}}')
    assert "called 'get_time'" in wrong_name.detail["reason"]
    wrong_args = score(want, '{"name": "get_weather", "arguments": {"city": "Rome"}}')
    assert wrong_args.detail["reason"] == "arguments differ"
    assert score(want, "[1]").detail["reason"] == "not a tool call"
