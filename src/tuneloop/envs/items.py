"""An agent item's tools and environment, as the agent loop uses them.

The fields themselves (`tools`, `environment`, `tool_results`, `expected_tools`) and the checks
`load_suite` runs on them are the suite's contract: `tuneloop.suite.agent`.
"""

from __future__ import annotations

from typing import Any

from tuneloop.envs.base import tool_schema
from tuneloop.suite import DEFAULT_ENVIRONMENT


def is_agent_item(item: dict[str, Any]) -> bool:
    """An item the eval runs through the agent loop: one that offers tools."""
    return bool(item.get("tools"))


def item_tools(item: dict[str, Any]) -> list[dict[str, Any]]:
    """The item's `tools` as the request's OpenAI `tools` list."""
    return [tool_schema(t) if isinstance(t, str) else t for t in item.get("tools", [])]


def tool_parameters(item: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Tool name → JSON schema of its arguments, for every tool the item offers."""
    return {t["function"]["name"]: t["function"].get("parameters", {}) for t in item_tools(item)}


def environment_name(item: dict[str, Any]) -> str:
    return str(item.get("environment", DEFAULT_ENVIRONMENT))
