"""Registering tools and environments (their protocols, `Tool`, `Environment` and
`EnvironmentFactory`, are core: `tuneloop.plugins`).

A tool is a pure function registered by name with its JSON schema in the registration:

    @tool("calculator", description="Evaluate an arithmetic expression.",
          parameters={"type": "object", "properties": {"expression": {"type": "string"}},
                      "required": ["expression"]})
    def calculator(expression: str) -> str: ...

It is called with the model's arguments as keywords, after they validated against `parameters`.
It returns a string (sent to the model as is) or any JSON value (sent as JSON); it raises
`ToolError` — or anything else — for a call it cannot serve, which the loop records as a failed
call, never as an infrastructure error.

An environment is a factory registered by name (`@environment("pure")`) that takes a suite item
(a plain dict) and returns an object with `call(name, arguments) -> str`: where a tool call's
result comes from. Environments are deterministic and hermetic by contract — the same item and
call give the same result, with no network, clock or shared state — so an agent eval reruns
offline to the same trajectory (`pure`: registered tools; `recorded`: results the item carries,
replayed by call signature; see `environments.py`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from tuneloop.plugins import EnvironmentFactory, Tool
from tuneloop.registry import environments, tools

F = TypeVar("F", bound=Tool)
E = TypeVar("E", bound=EnvironmentFactory)


class ToolError(Exception):
    """A tool refuses or cannot serve a call; the message is what the model is told."""


def tool(name: str, *, description: str, parameters: dict[str, Any]) -> Callable[[F], F]:
    """Decorator: register a pure tool under `name`, with its schema as properties."""

    def deco(fn: F) -> F:
        fn.description = description  # type: ignore[attr-defined]
        fn.parameters = parameters  # type: ignore[attr-defined]
        tools.register(name)(fn)
        return fn

    return deco


def environment(name: str) -> Callable[[E], E]:
    """Decorator: register an environment factory `factory(item) -> Environment`."""

    def deco(factory: E) -> E:
        environments.register(name)(factory)
        return factory

    return deco


def tool_schema(name: str) -> dict[str, Any]:
    """The OpenAI `tools` entry of a registered tool."""
    fn = tools.get(name)
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": getattr(fn, "description", ""),
            "parameters": getattr(fn, "parameters", {"type": "object"}),
        },
    }


def call_signature(name: str, arguments: Any) -> str:
    """The key a call is known by: its name and its arguments as canonical JSON (sorted keys,
    no spaces), so `{"a": 1, "b": 2}` and `{"b": 2, "a": 1}` are one call."""
    return f"{name}:{json.dumps(arguments, sort_keys=True, separators=(',', ':'))}"


def as_text(result: Any) -> str:
    """A tool's return value as the tool message content."""
    return result if isinstance(result, str) else json.dumps(result, sort_keys=True)
