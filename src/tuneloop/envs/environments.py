"""The built-in environments: where an agent item's tool results come from.

`pure` (the default for an item with `tools`): each call runs the registered tool of that
name (`@tool`), a pure function of its arguments.

`recorded`: the item carries the results, replayed by call signature (the tool name and its
arguments as canonical JSON, `base.call_signature`), so a trajectory over tools that touch the
world — a search engine, a database — reruns offline:

    {"id": "w1", "environment": "recorded", "tools": [{"type": "function", "function": {…}}],
     "tool_results": [{"name": "weather", "arguments": {"city": "Paris"}, "result": "18 C"}],
     "messages": […]}

A call with no recorded result is a failed call ("no recorded result"), told to the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuneloop.envs.base import ToolError, as_text, call_signature, environment
from tuneloop.registry import tools


@dataclass(frozen=True)
class PureTools:
    """Calls the registered tools."""

    def call(self, name: str, arguments: dict[str, Any]) -> str:
        return as_text(tools.get(name)(**arguments))


@dataclass(frozen=True)
class Recorded:
    """Replays results by call signature."""

    results: dict[str, str]

    def call(self, name: str, arguments: dict[str, Any]) -> str:
        try:
            return self.results[call_signature(name, arguments)]
        except KeyError:
            raise ToolError(f"no recorded result for {call_signature(name, arguments)}") from None


@environment("pure")
def pure(item: dict[str, Any]) -> PureTools:
    """Registered pure tools (`@tool`)."""
    return PureTools()


@environment("recorded")
def recorded(item: dict[str, Any]) -> Recorded:
    """The item's `tool_results`, replayed by call signature."""
    results = {
        call_signature(r["name"], r.get("arguments", {})): as_text(r["result"])
        for r in item.get("tool_results", [])
    }
    return Recorded(results)
