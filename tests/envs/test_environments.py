"""The built-in environments: registered pure tools, and recorded results by call signature."""

from __future__ import annotations

import pytest

from tuneloop.envs import ToolError, call_signature, environment_for
from tuneloop.registry import environments


def test_registered() -> None:
    assert {"pure", "recorded"} <= set(environments.names())


def test_pure_runs_registered_tools() -> None:
    env = environment_for({"tools": ["calculator"]})
    assert env.call("calculator", {"expression": "3*3"}) == "9"


def test_recorded_replays_by_signature_whatever_the_key_order() -> None:
    item = {
        "environment": "recorded",
        "tool_results": [
            {"name": "lookup", "arguments": {"a": 1, "b": [2]}, "result": {"x": 1}},
            {"name": "lookup", "arguments": {"a": 2}, "result": "two"},
        ],
    }
    env = environment_for(item)
    assert env.call("lookup", {"b": [2], "a": 1}) == '{"x": 1}'
    assert env.call("lookup", {"a": 2}) == "two"
    with pytest.raises(ToolError, match="no recorded result for lookup"):
        env.call("lookup", {"a": 3})


def test_call_signature_is_canonical() -> None:
    assert call_signature("f", {"b": 1, "a": 2}) == 'f:{"a":2,"b":1}'
