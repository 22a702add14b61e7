"""Helpers the dialect readers share: indexed attributes, JSON attributes, message parts."""

from __future__ import annotations

import json
from typing import Any

from tuneloop.data.ingest.chat import BadMessage
from tuneloop.records.trace import Message, ToolCall

_ROLES = {"developer": "system", "human": "user", "model": "assistant", "ai": "assistant"}


def message_of(
    role: str, text: list[str], reasoning: list[str], calls: list[ToolCall], results: list[Message]
) -> list[Message]:
    """One message from its parts; a message of tool results becomes one tool message each."""
    if results:
        rest = [Message(role="user", content="\n".join(text))] if any(text) else []
        return [*results, *rest]
    message = Message(role=role, content="\n".join(text) if text else None)  # type: ignore[arg-type]
    if role == "assistant":
        message.tool_calls = calls or None
        message.reasoning = "\n".join(r for r in reasoning if r) or None
    return [message]


def as_answer(messages: list[Message]) -> Message | None:
    """The output message, which must be the model's."""
    if not messages:
        return None
    out = messages[0]
    if out.role != "assistant":
        out = Message(role="assistant", content=out.content)
    return out


def pair_by_order(messages: list[Message]) -> list[Message]:
    """Give each tool message that names no call the next unanswered call before it."""
    waiting: list[str] = []
    for m in messages:
        if m.role == "assistant":
            waiting = [c.id for c in m.tool_calls or []]
        elif m.role == "tool":
            if m.tool_call_id is None:
                if not waiting:
                    raise BadMessage("a tool message answers no call before it")
                m.tool_call_id = waiting[0]
            if m.tool_call_id in waiting:
                waiting.remove(m.tool_call_id)
    return messages


def indexed(attrs: dict[str, Any], prefix: str) -> list[tuple[int, dict[str, Any]]]:
    """[(N, {rest: value})] of the keys `prefix.N.rest`, by N."""
    out: dict[int, dict[str, Any]] = {}
    start = prefix + "."
    for key, value in attrs.items():
        if key.startswith(start):
            head, _, rest = key[len(start) :].partition(".")
            if head.isdigit() and rest:
                out.setdefault(int(head), {})[rest] = value
    return sorted(out.items())


def json_attr(attrs: dict[str, Any], key: str) -> Any:
    """An attribute holding JSON text, decoded (values already structured pass through)."""
    value = attrs.get(key)
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as err:
        if key == "gen_ai.system_instructions":
            return value  # plain text is a fine system prompt
        if key == "ai.prompt":
            return {"prompt": value}
        raise BadMessage(f"{key} is not JSON ({err.msg} at character {err.pos})") from None


def as_list(value: Any, what: str) -> list[Any]:
    """A list of messages or parts (one object stands for a list of one)."""
    if isinstance(value, dict):
        return [value]
    if not isinstance(value, list):
        raise BadMessage(f"{what} must be a list (got {type(value).__name__})")
    return value


def role_of(value: Any, where: str) -> Any:
    """A canonical role (system, user, assistant, tool) from a dialect's spelling."""
    role = _ROLES.get(str(value).lower(), str(value).lower())
    if role not in ("system", "user", "assistant", "tool"):
        raise BadMessage(f"{where}: unknown role {value!r}")
    return role


def text_of(value: Any) -> str:
    """Message text from a string, a list of text parts, or other JSON (kept as JSON)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(p, dict) for p in value):
        return parts_text(value)
    return json.dumps(value, ensure_ascii=False)


def parts_text(parts: list[Any]) -> str:
    """The texts of a list of parts (`content` or `text`), a line apart."""
    return "\n".join(
        text_of(p.get("content", p.get("text"))) if isinstance(p, dict) else str(p) for p in parts
    )


def tool_call(call_id: Any, name: Any, arguments: Any, i: int) -> ToolCall:
    """A tool call; arguments kept as JSON text; a call without id is `call_<i>`."""
    if not isinstance(name, str) or not name:
        raise BadMessage(f"tool call {call_id or i} has no name")
    args = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    return ToolCall(id=str(call_id) if call_id else f"call_{i}", name=name, arguments=args)


def part_id(part: dict[str, Any]) -> str | None:
    """The call id a part names, as a string."""
    return str(part["id"]) if part.get("id") is not None else None
