"""Any completion as an AgentTrace: what training hands the agent scorers."""

from __future__ import annotations

import json

from tuneloop.envs import as_trace
from tuneloop.samplelog import AgentTrace

ITEM = {"tools": ["calculator"]}


def _call(call_id: str, name: str, args: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def test_text_is_a_one_turn_answer() -> None:
    trace = as_trace("The answer is 4.", ITEM)
    assert (trace.turns, trace.calls, trace.finished, trace.answer) == (
        1,
        [],
        True,
        "The answer is 4.",
    )


def test_a_trace_is_itself() -> None:
    trace = AgentTrace(turns=3)
    assert as_trace(trace, ITEM) is trace


def test_messages_are_rebuilt_with_the_loop_s_classification() -> None:
    messages = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                _call("a", "calculator", '{"expression": "1/0"}'),
                _call("b", "calc", "{}"),
                _call("c", "calculator", "{oops"),
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": json.dumps({"error": "division by zero"})},
        {"role": "tool", "tool_call_id": "b", "content": json.dumps({"error": "unknown tool"})},
        {"role": "tool", "tool_call_id": "c", "content": json.dumps({"error": "bad json"})},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [_call("d", "calculator", '{"expression": "2"}')],
        },
        {"role": "tool", "tool_call_id": "d", "content": "2"},
        {"role": "assistant", "content": "It is 2."},
    ]
    trace = as_trace(messages, ITEM)
    assert [(c.turn, c.status) for c in trace.calls] == [
        (0, "failed"),
        (0, "unknown_tool"),
        (0, "invalid_json"),
        (1, "ok"),
    ]
    assert trace.turns == 3 and trace.finished and trace.answer == "It is 2."


def test_a_conversation_ending_in_calls_is_unfinished() -> None:
    messages = [
        {"role": "assistant", "content": None, "tool_calls": [_call("a", "calculator", "{}")]}
    ]
    assert as_trace(messages, ITEM).stop == "max_turns"
