"""Shared library: tools and hermetic environments for agent suites (evaluate and train).

    from tuneloop.envs import environment_for, item_tools, run_calls
    env = environment_for(item)                       # the item's registered environment
    calls, tool_messages = run_calls(message["tool_calls"], turn, tool_parameters(item), env)

`base.py` (the `@tool` / `@environment` registrations, call signatures), `calculator.py` (the
built-in `calculator` tool: safe arithmetic, no `eval()`), `environments.py` (`pure`:
registered tools; `recorded`: results replayed by call signature), `calls.py` (check a turn's
calls — JSON, known tool, JSON schema — run them, and say what went wrong to the model),
`items.py` (an item's tools and environment; the fields and their checks are the suite's,
`tuneloop.suite.agent`), `trajectory.py` (any completion as an `AgentTrace`, for the agent
scorers). Importing this package registers the built-ins. The loop
that calls the model lives in the phase that drives it (`evaluate/agent.py`).
"""

from typing import Any

from tuneloop.envs import calculator, environments  # noqa: F401  (registers the built-ins)
from tuneloop.envs.base import ToolError, call_signature, environment, tool
from tuneloop.envs.calls import run_calls
from tuneloop.envs.items import environment_name, is_agent_item, item_tools, tool_parameters
from tuneloop.envs.trajectory import as_trace
from tuneloop.plugins import Environment
from tuneloop.registry import environments as environment_registry


def environment_for(item: dict[str, Any]) -> Environment:
    """The item's environment, built for it (`environment`, default `pure`)."""
    return environment_registry.get(environment_name(item))(item)


__all__ = [
    "ToolError",
    "as_trace",
    "call_signature",
    "environment",
    "environment_for",
    "is_agent_item",
    "item_tools",
    "run_calls",
    "tool",
    "tool_parameters",
]
