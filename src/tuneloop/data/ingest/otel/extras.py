"""What a model span says about its call besides the messages: token usage, finish reasons,
the response id, and the tools offered (in OpenAI's `{"type": "function", ...}` form)."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from tuneloop.data.ingest.chat import BadMessage
from tuneloop.data.ingest.otel.values import as_list, indexed, json_attr

USAGE = {
    "input_tokens": (
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.prompt_tokens",
        "llm.token_count.prompt",
        "ai.usage.inputTokens",
        "ai.usage.promptTokens",
    ),
    "output_tokens": (
        "gen_ai.usage.output_tokens",
        "gen_ai.usage.completion_tokens",
        "llm.token_count.completion",
        "ai.usage.outputTokens",
        "ai.usage.completionTokens",
    ),
}
"""Token counts by the names each dialect gives them, first found wins."""


def call_extras(attrs: dict[str, Any]) -> dict[str, Any]:
    """Usage, finish reasons, response id and the tools offered, when the span has them."""
    extras: dict[str, Any] = {}
    usage = {}
    for name, keys in USAGE.items():
        found = [attrs[k] for k in keys if type(attrs.get(k)) is int]
        if found:
            usage[name] = found[0]
    if usage:
        extras["usage"] = usage
    reasons = attrs.get("gen_ai.response.finish_reasons") or attrs.get("llm.finish_reason")
    reasons = reasons or attrs.get("ai.response.finishReason")
    if reasons:
        extras["finish_reasons"] = reasons if isinstance(reasons, list) else [reasons]
    rid = attrs.get("gen_ai.response.id") or attrs.get("ai.response.id")
    if isinstance(rid, str):
        extras["response_id"] = rid
    tools = offered_tools(attrs)
    if tools:
        extras["tools"] = tools
    return extras


def offered_tools(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    """The tools offered to the model, in OpenAI's `{"type": "function", "function": …}` form."""
    raw: list[Any] = []
    try:
        for key in ("gen_ai.tool.definitions", "mlflow.chat.tools"):
            raw += as_list(json_attr(attrs, key) or [], key)
        for _, f in indexed(attrs, "llm.tools"):
            raw.append(json_attr(f, "tool.json_schema"))
        for spec in as_list(attrs.get("ai.prompt.tools") or [], "ai.prompt.tools"):
            raw.append(json.loads(spec) if isinstance(spec, str) else spec)
    except (BadMessage, json.JSONDecodeError):
        return []  # the tool list is context, not the conversation: never a reason to reject
    for _, f in indexed(attrs, "llm.request.functions"):
        raw.append({k: f[k] for k in ("name", "description", "parameters") if k in f})
    tools = []
    for spec in raw:
        if not isinstance(spec, dict):
            continue
        fn: dict[str, Any] = spec["function"] if isinstance(spec.get("function"), dict) else spec
        params = fn.get("parameters", fn.get("inputSchema"))
        if isinstance(params, str):
            with contextlib.suppress(json.JSONDecodeError):
                params = json.loads(params)
        body = {"name": fn.get("name"), "description": fn.get("description"), "parameters": params}
        tools.append({"type": "function", "function": {k: v for k, v in body.items() if v}})
    return tools
