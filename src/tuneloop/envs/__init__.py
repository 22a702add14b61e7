"""Shared library: tools and hermetic environments for agent suites (evaluate and train).

    from tuneloop.envs import environment_for, item_tools, run_calls
    env = environment_for(item)                       # the item's registered environment
    calls, tool_messages = run_calls(message["tool_calls"], turn, tool_parameters(item), env)

`base.py` (the `@tool` / `@environment` registrations, call signatures), `calculator.py` (the
built-in `calculator` tool: safe arithmetic, no `eval()`), `environments.py` (`pure`:
registered tools; `recorded`: results replayed by call signature), `calls.py` (check a turn's
calls — JSON, known tool, JSON schema — run them, and say what went wrong to the model),
`items.py` (an item's agent fields and their checks), `trajectory.py` (any completion as an
`AgentTrace`, for the agent scorers). Importing this package registers the built-ins. The loop
that calls the model lives in the phase that drives it (`evaluate/agent.py`).
"""

from typing import Any

from tuneloop.envs import calculator, environments  # noqa: F401  (registers the built-ins)
from tuneloop.envs.base import Environment, ToolError, call_signature, environment, tool
from tuneloop.envs.calls import run_calls
from tuneloop.envs.items import (
    check_agent_item,
    environment_name,
    is_agent_item,
    item_tools,
    tool_parameters,
)
from tuneloop.envs.trajectory import as_trace


def environment_for(item: dict[str, Any]) -> Environment:
    """The item's environment, built for it (`environment`, default `pure`)."""
    from tuneloop.registry import environments as registry

    return registry.get(environment_name(item))(item)  # type: ignore[no-any-return]


__all__ = [
    "Environment",
    "ToolError",
    "as_trace",
    "call_signature",
    "check_agent_item",
    "environment",
    "environment_for",
    "is_agent_item",
    "item_tools",
    "run_calls",
    "tool",
    "tool_parameters",
]
