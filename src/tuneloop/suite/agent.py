"""The agent fields of a suite item: what they mean, and the checks `load_suite` runs on them.

    {"id": "calc-1", "messages": [{"role": "user", "content": "What is 37 * 45 + 12?"}],
     "tools": ["calculator"], "answer": "1677", "scorer": "agent_answer",
     "expected_tools": [{"name": "calculator"}]}

- `tools`: a list of registered tool names (their schema comes from the registration) or
  OpenAI function entries `{"type": "function", "function": {"name", "description",
  "parameters"}}` (`parameters` must be a valid JSON Schema);
- `environment`: a registered environment (`pure`, the default, or `recorded`);
- `tool_results` (for `recorded`): `[{"name", "arguments": {…}, "result"}]`;
- `expected_tools` (optional, for `tool_match`): `[{"name", "arguments"?}]`.

Errors name the file and line, like every suite error. The names are checked against the
`tools` and `environments` registries only; running the tools is `tuneloop.envs`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tuneloop.errors import InputError, did_you_mean
from tuneloop.registry import environments, tools

AGENT_FIELDS = ("tools", "environment", "tool_results", "expected_tools")
"""An item with any of these is an agent item, and `check_agent_item` checks them."""
DEFAULT_ENVIRONMENT = "pure"
"""The environment of an agent item that names none."""


def check_agent_item(raw: dict[str, Any], where: str) -> None:
    """Refuse malformed agent fields, naming `where` (file:line) and what was expected."""
    if raw.get("messages") is None:
        raise InputError(f"{where}: an item with tools needs 'messages' (a chat), not 'prompt'")
    offered = raw.get("tools")
    if not isinstance(offered, list) or not offered:
        raise InputError(f"{where}: 'tools' must be a non-empty list of tool names or schemas")
    env = raw.get("environment", DEFAULT_ENVIRONMENT)
    if not isinstance(env, str) or env not in environments:
        raise InputError(_unknown("environment", env, environments.names(), where))
    names = [_check_tool(t, env, where) for t in offered]
    if len(set(names)) != len(names):
        raise InputError(f"{where}: 'tools' names a tool twice")
    _check_list(raw, "tool_results", where, lambda r: "result" in r)
    _check_list(raw, "expected_tools", where, lambda r: True)
    for entry in raw.get("expected_tools", []):
        if entry["name"] not in names:
            raise InputError(
                f"{where}: expected tool {entry['name']!r} is not among the item's tools"
            )


def _unknown(kind: str, name: Any, known: list[str], where: str) -> str:
    hint = did_you_mean(name, known) if isinstance(name, str) else ""
    return f"{where}: unknown {kind} {name!r}{hint}; known: {', '.join(known)}"


def _check_tool(entry: Any, env: str, where: str) -> str:
    if isinstance(entry, str):
        if entry not in tools:
            raise InputError(_unknown("tool", entry, tools.names(), where))
        return entry
    function = entry.get("function") if isinstance(entry, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise InputError(
            f"{where}: a tool must be a registered name or "
            '{"type": "function", "function": {"name": …, "parameters": {…}}}'
        )
    import jsonschema

    try:
        jsonschema.validators.validator_for(function.get("parameters", {})).check_schema(
            function.get("parameters", {})
        )
    except jsonschema.SchemaError as err:
        raise InputError(
            f"{where}: tool {function['name']!r}: 'parameters' is not a JSON Schema: {err.message}"
        ) from None
    if env == DEFAULT_ENVIRONMENT and function["name"] not in tools:
        raise InputError(
            f"{where}: tool {function['name']!r} has no registered implementation for "
            "environment 'pure'; register one with @tool or use 'environment': 'recorded'"
        )
    return str(function["name"])


def _check_list(raw: dict[str, Any], key: str, where: str, ok: Callable[[dict], bool]) -> None:
    value = raw.get(key, [])
    good = isinstance(value, list) and all(
        isinstance(r, dict)
        and isinstance(r.get("name"), str)
        and isinstance(r.get("arguments", {}), dict)
        and ok(r)
        for r in value
    )
    if not good:
        raise InputError(
            f"{where}: {key!r} must be a list of {{'name', 'arguments': {{…}}"
            f"{', ' + repr('result') if key == 'tool_results' else ''}}} objects"
        )
