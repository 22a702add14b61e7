"""Agent rows in GRPO: TRL runs the tool loop, the item's environment answers the calls.

TRL 1.16's `GRPOTrainer` runs tool calls during rollouts itself (`environment_factory`): it
parses each completion's calls with the tokenizer's response template, calls the environment
method of that name, appends the result as a `tool` message and generates on; the result's
tokens get `tool_mask` 0 and so carry no loss. We hand it one environment class per distinct
tool set in the data (TRL renders a class's methods as the prompt's tools), its methods built
from the items' tool schemas. `reset(item=…)` builds the item's own environment (`pure` or
`recorded`), and each call goes through `envs.calls` — the same JSON-schema check and the same
`{"error": …}` message for a refused call as in the eval.

Deliberately different from the eval's loop (`evaluate/agent.py`): a rollout is bounded by
`grpo.max_completion_length` (tokens over all its turns, TRL's rule), not by `max_turns`; the
prompt's tool list is the one transformers derives from a method's signature, so it keeps each
argument's type and description but not nested schema detail (`items`, `enum`); and the chat
template must render tools itself. TRL checks that and parses calls only for templates it knows
(Qwen 2.5/3, Llama 3.1, …); a tool-less template is refused with an InputError rather than
trained through a second, home-made rollout loop.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from typing import Any

from tuneloop.envs import environment_for, item_tools, tool_parameters
from tuneloop.envs.calls import classify, run_call
from tuneloop.errors import InputError

_PY_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
}
NO_TOOLS = "no_tools"
"""The environment of rows that offer no tools (no methods: the prompt lists no tools)."""


class ToolEnvironment:
    """One rollout's environment: the item's own, set by `reset`, answering calls by name."""

    def reset(self, item: str | None = None, **_: Any) -> None:
        row = json.loads(item) if item else {}
        self._env = environment_for(row)
        self._schemas = tool_parameters(row)

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        raw = {"function": {"name": name, "arguments": arguments}}
        return run_call(classify(raw, 0, 0, self._schemas), self._env).result or ""


def tool_method(tool: dict[str, Any]) -> Any:
    """A method calling `tool` (an OpenAI function entry) whose signature and Google-style
    docstring carry the entry's schema, as transformers' `get_json_schema` reads them."""
    function = tool["function"]
    name, schema = function["name"], function.get("parameters") or {}
    required = set(schema.get("required", []))
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    docs = []
    for arg, spec in (schema.get("properties") or {}).items():
        spec = spec if isinstance(spec, dict) else {}
        kind = _PY_TYPES.get(str(spec.get("type")), str)
        default = inspect.Parameter.empty if arg in required else None
        params.append(
            inspect.Parameter(arg, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=kind)
        )
        docs.append(f"    {arg}: {' '.join(str(spec.get('description') or arg).split())}")

    def method(self: ToolEnvironment, **arguments: Any) -> str:
        return self._call(name, arguments)

    method.__name__ = method.__qualname__ = name
    method.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    method.__annotations__ = {p.name: p.annotation for p in params[1:]} | {"return": str}
    summary = " ".join(str(function.get("description") or name).split())
    method.__doc__ = summary + ("\n\nArgs:\n" + "\n".join(docs) if docs else "")
    return method


def environment_key(tools: list[dict[str, Any]]) -> str:
    """A name for a tool set: its tool names and a digest of their schemas."""
    if not tools:
        return NO_TOOLS
    digest = hashlib.sha256(json.dumps(tools, sort_keys=True).encode()).hexdigest()[:8]
    return "+".join(t["function"]["name"] for t in tools) + f"-{digest}"


def environment_class(tools: list[dict[str, Any]]) -> type[ToolEnvironment]:
    """A `ToolEnvironment` subclass with one method per tool."""
    methods = {}
    for tool in tools:
        name = tool["function"]["name"]
        if not name.isidentifier() or name.startswith("_") or name in ("reset", "get_reward"):
            raise InputError(
                f"GRPO with tools: tool name {name!r} cannot be a Python method name "
                "(TRL calls tools as methods); rename the tool"
            )
        methods[name] = tool_method(tool)
    return type(
        "Env_" + environment_key(tools).replace("+", "_").replace("-", "_"),
        (ToolEnvironment,),
        methods,
    )


def with_environments(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict | None]:
    """(rows with an `environment` column, TRL's `environment_factory`), or (rows, None) when
    no row offers tools. Rows are GRPO rows (`item`: the suite row as JSON)."""
    tool_sets = [item_tools(json.loads(r["item"])) if "item" in r else [] for r in rows]
    if not any(tool_sets):
        return rows, None
    factories: dict[str, type[ToolEnvironment]] = {}
    out = []
    for row, tools in zip(rows, tool_sets, strict=True):
        key = environment_key(tools)
        if key not in factories:
            factories[key] = environment_class(tools)
        out.append({**row, "environment": key})
    return out, factories


def check_template(tokenizer: Any) -> None:
    """Refuse, before TRL does, a chat template GRPO cannot run tools through."""
    from trl.chat_template_utils import add_response_schema, supports_tool_calling

    if not supports_tool_calling(tokenizer):
        raise InputError(
            "GRPO with tools: the base model's chat template does not render tool calls and "
            "tool results; use a tool-calling checkpoint (e.g. Qwen 2.5) or drop 'tools' from "
            "the training rows"
        )
    has = getattr(tokenizer, "response_template", None) or getattr(
        tokenizer, "response_schema", None
    )
    if not has:
        try:
            add_response_schema(tokenizer)
        except ValueError:
            raise InputError(
                "GRPO with tools: TRL cannot parse tool calls for this chat template (it knows "
                "Qwen 2.5/3, Llama 3.1/3.2, GLM 4, GPT-OSS, …); set the tokenizer's "
                "response_template or use one of those checkpoints"
            ) from None
