"""One model turn's tool calls, checked and run against the item's environment.

    calls, messages = run_calls(raw_tool_calls, turn, schemas, env)

Each call is classified before anything runs: arguments that are not JSON (`invalid_json`), a
name the item does not offer (`unknown_tool`), arguments that are not an object or break the
tool's JSON schema (`invalid_arguments`, checked with `jsonschema`). A refused call is not run;
its tool message tells the model why, as `{"error": "…"}`, and the loop goes on. A call that
runs and raises is `failed`, with the same kind of message; nothing a tool does is an
infrastructure error. The tool messages come back in the order of the calls.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tuneloop.envs.base import ToolError
from tuneloop.plugins import Environment
from tuneloop.samplelog import ToolCall

ERROR_KEY = "error"
"""A tool message whose content is a JSON object with only this key reports an error."""


def error_content(message: str) -> str:
    return json.dumps({ERROR_KEY: message})


def is_error_content(content: Any) -> bool:
    """Whether a tool message's content is an error report (see `error_content`)."""
    if not isinstance(content, str) or not content.startswith("{"):
        return False
    try:
        value = json.loads(content)
    except json.JSONDecodeError:
        return False
    return isinstance(value, dict) and list(value) == [ERROR_KEY]


def _schema_error(arguments: Any, schema: Mapping[str, Any]) -> str | None:
    import jsonschema

    if not isinstance(arguments, dict):
        return f"arguments must be a JSON object, got {type(arguments).__name__}"
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.path))
    if errors:
        where = "/".join(str(p) for p in errors[0].path)
        return f"arguments{'/' + where if where else ''}: {errors[0].message}"
    return None


def classify(raw: Any, turn: int, j: int, schemas: Mapping[str, Mapping[str, Any]]) -> ToolCall:
    """The call as the model wrote it, with its status before running (result not set)."""
    raw = raw if isinstance(raw, dict) else {}
    function = raw.get("function") if isinstance(raw.get("function"), dict) else {}
    name: str = function["name"] if isinstance(function.get("name"), str) else ""
    call_id = raw.get("id") if isinstance(raw.get("id"), str) and raw["id"] else f"call_{turn}_{j}"
    args_in = function.get("arguments", "{}")
    raw_args = args_in if isinstance(args_in, str) else json.dumps(args_in)
    call = ToolCall(turn=turn, id=call_id, name=name, raw_arguments=raw_args)
    try:
        arguments = json.loads(raw_args) if raw_args.strip() else {}
    except (json.JSONDecodeError, RecursionError) as err:
        msg = err.msg if isinstance(err, json.JSONDecodeError) else "nested too deeply"
        return call.model_copy(update={"status": "invalid_json", "error": f"arguments: {msg}"})
    call = call.model_copy(update={"arguments": arguments})
    if name not in schemas:
        known = ", ".join(sorted(schemas)) or "none"
        return call.model_copy(
            update={"status": "unknown_tool", "error": f"unknown tool {name!r}; tools: {known}"}
        )
    problem = _schema_error(arguments, schemas[name])
    if problem:
        return call.model_copy(update={"status": "invalid_arguments", "error": problem})
    return call


def run_call(call: ToolCall, env: Environment) -> ToolCall:
    """Run one classified call; refused calls are returned with their error as the result."""
    if call.status != "ok":
        return call.model_copy(update={"result": error_content(call.error or call.status)})
    try:
        result = env.call(call.name, call.arguments)
    except ToolError as err:
        error = str(err) or "tool error"
    except Exception as err:  # a tool bug is a failed call: the model sees it, the eval goes on
        error = f"{type(err).__name__}: {err}"[:500]
    else:
        return call.model_copy(update={"result": result})
    return call.model_copy(
        update={"status": "failed", "error": error, "result": error_content(error)}
    )


def run_calls(
    raw_calls: list[Any], turn: int, schemas: Mapping[str, Mapping[str, Any]], env: Environment
) -> tuple[list[ToolCall], list[dict[str, Any]]]:
    """(call records, `tool` messages) for one turn's calls, in order."""
    calls = [run_call(classify(raw, turn, j, schemas), env) for j, raw in enumerate(raw_calls)]
    messages = [{"role": "tool", "tool_call_id": c.id, "content": c.result or ""} for c in calls]
    return calls, messages
