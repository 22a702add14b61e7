"""An agent item's tools as the request's OpenAI `tools` list, and their argument schemas."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tuneloop.envs import item_tools, tool_parameters
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


def test_names_and_schemas_become_the_request_tools(tmp_path: Path) -> None:
    suite = load_suite(
        _suite(
            tmp_path,
            messages=USER,
            tools=["calculator", WEATHER],
            environment="recorded",
            tool_results=[{"name": "weather", "arguments": {"city": "Oslo"}, "result": "3"}],
            expected_tools=[{"name": "weather"}],
        )
    )
    raw = suite.items[1].raw
    assert [t["function"]["name"] for t in item_tools(raw)] == ["calculator", "weather"]
    assert tool_parameters(raw)["calculator"]["required"] == ["expression"]
