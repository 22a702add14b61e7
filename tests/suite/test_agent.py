"""An agent item's fields, checked when the suite loads: file:line and what was expected."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tuneloop.errors import InputError
from tuneloop.suite import load_suite

USER = [{"role": "user", "content": "Compute: 1 + 1"}]
WEATHER = {
    "type": "function",
    "function": {
        "name": "weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def _suite(tmp_path: Path, **fields: Any) -> Path:
    path = tmp_path / "suite.jsonl"
    first = {"id": "ok", "messages": USER, "answer": "2"}
    path.write_text(json.dumps(first) + "\n" + json.dumps({"id": "a", "answer": "2", **fields}))
    return path


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"prompt": "hi", "tools": ["calculator"]}, "needs 'messages'"),
        ({"messages": USER, "tools": ["calculater"]}, "did you mean 'calculator'"),
        ({"messages": USER, "tools": []}, "non-empty list"),
        ({"messages": USER, "tools": ["calculator"], "environment": "recordd"}, "'recorded'"),
        ({"messages": USER, "tools": [WEATHER]}, "no registered implementation"),
        ({"messages": USER, "tools": [{"function": {"name": 3}}]}, "registered name or"),
        ({"messages": USER, "tools": ["calculator", "calculator"]}, "names a tool twice"),
        (
            {
                "messages": USER,
                "environment": "recorded",
                "tools": [{"function": {"name": "w", "parameters": {"type": "nope"}}}],
            },
            "not a JSON Schema",
        ),
        (
            {"messages": USER, "tools": ["calculator"], "expected_tools": [{"name": "weather"}]},
            "not among the item's tools",
        ),
        (
            {
                "messages": USER,
                "tools": ["calculator"],
                "environment": "recorded",
                "tool_results": [{"name": "calculator"}],
            },
            "'tool_results' must be a list",
        ),
    ],
)
def test_bad_agent_fields_name_file_and_line(tmp_path: Path, fields: dict, message: str) -> None:
    path = _suite(tmp_path, **fields)
    with pytest.raises(InputError, match=f"{path}:2: .*{message}"):
        load_suite(path)


def test_earlier_turns_may_hold_tool_calls(tmp_path: Path) -> None:
    turns = [
        *USER,
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "function": {}}]},
        {"role": "tool", "tool_call_id": "c", "content": "2"},
    ]
    assert load_suite(_suite(tmp_path, messages=turns, tools=["calculator"])).items[1].messages
    bad = [*USER, {"role": "user", "content": None}]
    with pytest.raises(InputError, match="null content"):
        load_suite(_suite(tmp_path, messages=bad))
