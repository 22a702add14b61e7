"""What an agent scorer scores: any completion, as an `AgentTrace`.

    trace = as_trace(completion, item)

The eval hands agent scorers the trace it logged. Training hands them a completion: text
(a single final answer: one turn, no calls) or a conversation — the list of messages after the
prompt, as TRL passes conversational completions — from which the calls are rebuilt: each
assistant `tool_calls` entry is classified against the item's tools exactly as the eval's loop
does (`calls.classify`), its result is the `tool` message with its id, and a result in the
loop's error form (`{"error": …}`) marks a failed call. A conversation whose last assistant turn
still asks for tools is unfinished (`max_turns`); tokens are not known there and count 0.
"""

from __future__ import annotations

from typing import Any

from tuneloop.envs.calls import classify, is_error_content
from tuneloop.envs.items import tool_parameters
from tuneloop.samplelog import AgentTrace, ToolCall


def as_trace(completion: Any, item: dict[str, Any]) -> AgentTrace:
    if isinstance(completion, AgentTrace):
        return completion
    if isinstance(completion, list):
        return _from_messages([m for m in completion if isinstance(m, dict)], item)
    text = completion if isinstance(completion, str) else ""
    return AgentTrace(messages=[{"role": "assistant", "content": text}], turns=1)


def _from_messages(messages: list[dict[str, Any]], item: dict[str, Any]) -> AgentTrace:
    schemas = tool_parameters(item) if item.get("tools") else {}
    results = {m.get("tool_call_id"): m.get("content") for m in messages if m.get("role") == "tool"}
    calls: list[ToolCall] = []
    turn = -1
    pending = False
    for message in messages:
        if message.get("role") != "assistant":
            continue
        turn += 1
        raw_calls = message.get("tool_calls") or []
        pending = bool(raw_calls)
        for j, raw in enumerate(raw_calls if isinstance(raw_calls, list) else []):
            call = classify(raw, turn, j, schemas)
            result = results.get(call.id)
            update: dict[str, Any] = {"result": result if isinstance(result, str) else None}
            if call.status == "ok" and is_error_content(result):
                update.update(status="failed", error="the tool reported an error")
            calls.append(call.model_copy(update=update))
    return AgentTrace(
        messages=messages, calls=calls, turns=turn + 1, stop="max_turns" if pending else "answer"
    )
