"""A turn's tool calls: classified before running, refused or failed calls told to the model."""

from __future__ import annotations

import json
from typing import Any

from tuneloop.envs import ToolError, run_calls
from tuneloop.envs.calls import classify, is_error_content
from tuneloop.envs.environments import PureTools

SCHEMAS = {
    "calculator": {
        "type": "object",
        "properties": {"expression": {"type": "string"}},
        "required": ["expression"],
        "additionalProperties": False,
    }
}


def _raw(name: str, arguments: Any, call_id: str | None = "c1") -> dict[str, Any]:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


class Raising:
    def call(self, name: str, arguments: dict[str, Any]) -> str:
        raise RuntimeError("disk on fire")


def test_a_good_call_runs() -> None:
    calls, messages = run_calls(
        [_raw("calculator", {"expression": "2+3"})], 0, SCHEMAS, PureTools()
    )
    assert [(c.status, c.result, c.arguments) for c in calls] == [
        ("ok", "5", {"expression": "2+3"})
    ]
    assert messages == [{"role": "tool", "tool_call_id": "c1", "content": "5"}]


def test_refusals_are_returned_as_tool_errors_without_running() -> None:
    raws = [
        _raw("calculator", '{"expression": "2+'),
        _raw("calc", {"expression": "1"}),
        _raw("calculator", {"expr": "1"}),
        _raw("calculator", "[1, 2]"),
    ]
    calls, messages = run_calls(raws, 2, SCHEMAS, Raising())  # never reached
    assert [c.status for c in calls] == [
        "invalid_json",
        "unknown_tool",
        "invalid_arguments",
        "invalid_arguments",
    ]
    assert "unknown tool 'calc'; tools: calculator" in (calls[1].error or "")
    assert "'expression' is a required property" in (calls[2].error or "")
    assert all(is_error_content(m["content"]) for m in messages)
    assert calls[0].arguments is None and calls[0].raw_arguments == '{"expression": "2+'


def test_a_tool_that_raises_is_a_failed_call() -> None:
    calls, messages = run_calls([_raw("calculator", {"expression": "1"})], 0, SCHEMAS, Raising())
    assert calls[0].status == "failed" and calls[0].error == "RuntimeError: disk on fire"
    assert json.loads(messages[0]["content"]) == {"error": "RuntimeError: disk on fire"}


def test_tool_error_message_is_what_the_model_sees() -> None:
    calls, _ = run_calls([_raw("calculator", {"expression": "1/0"})], 0, SCHEMAS, PureTools())
    assert (calls[0].status, calls[0].error) == ("failed", "division by zero")
    assert ToolError.__name__ not in (calls[0].result or "")


def test_missing_ids_and_garbage_entries_are_named_by_position() -> None:
    call = classify("not an object", 3, 1, SCHEMAS)
    assert (call.id, call.name, call.status) == ("call_3_1", "", "unknown_tool")
    dict_args = {"function": {"name": "calculator", "arguments": {"expression": "1"}}}
    assert classify(dict_args, 0, 0, SCHEMAS).status == "ok"  # some servers send an object


def test_error_content_form() -> None:
    assert is_error_content('{"error": "x"}')
    assert not is_error_content('{"error": "x", "more": 1}') and not is_error_content("5")
