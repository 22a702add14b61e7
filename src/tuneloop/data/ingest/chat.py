"""OpenAI chat message dicts → canonical `Message`s (shared by openai_chat and generic_jsonl).

Accepted beyond the current API shape, because logs are old: the legacy `function_call` /
`function` role pair (mapped to a tool call and a tool message with a synthesized id), the
`developer` role (mapped to system), content as a list of parts (text parts joined; images,
audio and files kept as `[image]`-style placeholders), `refusal` text, `reasoning_content`,
and tool-call `arguments` logged as an object instead of a JSON string.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from tuneloop.records.trace import Message, ToolCall

_ROLES = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "gpt": "assistant",
    "bot": "assistant",
    "model": "assistant",
    "tool": "tool",
    "function": "tool",
    "ipython": "tool",
}
_PLACEHOLDER = {
    "image_url": "[image]",
    "image": "[image]",
    "input_image": "[image]",
    "input_audio": "[audio]",
    "audio": "[audio]",
    "file": "[file]",
}


class BadMessage(ValueError):
    """A message that cannot be converted; the text is the reject reason."""


def content_text(content: Any) -> str | None:
    """Text of an OpenAI `content` value: a string, None, or a list of parts."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict):
                kind = part.get("type", "text")
                if "text" in part and isinstance(part["text"], str):
                    parts.append(part["text"])
                elif kind in _PLACEHOLDER:
                    parts.append(_PLACEHOLDER[kind])
                elif kind == "refusal":
                    parts.append(str(part.get("refusal", "")))
                else:
                    parts.append(f"[{kind}]")
        return "\n".join(parts)
    raise BadMessage(
        f"content must be a string, null or a list of parts (got {type(content).__name__})"
    )


def _arguments(value: Any) -> str:
    if value is None:
        return "{}"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _tool_calls(raw: Any, where: str) -> list[ToolCall]:
    if not isinstance(raw, list):
        raise BadMessage(f"{where}: tool_calls must be a list")
    calls = []
    for j, call in enumerate(raw):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise BadMessage(f"{where}: tool_calls[{j}] has no function name")
        calls.append(
            ToolCall(
                id=str(call.get("id") or f"call_{j}"),
                name=fn["name"],
                arguments=_arguments(fn.get("arguments")),
            )
        )
    return calls


def to_messages(raw: Any, *, role_key: str = "role", content_key: str = "content") -> list[Message]:
    """Convert a list of chat message dicts; raise BadMessage naming the first bad one."""
    if not isinstance(raw, list) or not raw:
        raise BadMessage("messages must be a non-empty list")
    out: list[Message] = []
    legacy_calls: dict[str, str] = {}  # function name -> synthesized call id
    for i, msg in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(msg, dict):
            raise BadMessage(f"{where} is not an object")
        role = _ROLES.get(str(msg.get(role_key, "")).lower())
        if role is None:
            raise BadMessage(f"{where}: unknown role {msg.get(role_key)!r}")
        text = content_text(msg.get(content_key))
        if text is None and isinstance(msg.get("refusal"), str):
            text = msg["refusal"]
        m = Message(role=role, content=text)  # type: ignore[arg-type]
        if role == "assistant":
            if msg.get("tool_calls"):
                m.tool_calls = _tool_calls(msg["tool_calls"], where)
            elif isinstance(msg.get("function_call"), dict):
                fc = msg["function_call"]
                call_id = f"call_legacy_{i}"
                legacy_calls[str(fc.get("name"))] = call_id
                m.tool_calls = [
                    ToolCall(
                        id=call_id,
                        name=str(fc.get("name")),
                        arguments=_arguments(fc.get("arguments")),
                    )
                ]
            reasoning = msg.get("reasoning_content") or msg.get("reasoning")
            m.reasoning = reasoning if isinstance(reasoning, str) else None
        elif role == "tool":
            answers: Any = msg.get("tool_call_id") or legacy_calls.get(str(msg.get("name")))
            if not answers:
                raise BadMessage(f"{where}: tool message without tool_call_id")
            m.tool_call_id = str(answers)
            m.name = msg.get("name") if isinstance(msg.get("name"), str) else None
        out.append(m)
    return out


def iso_time(value: Any) -> str | None:
    """An ISO 8601 string from a unix time (s or ms) or a string (kept as given)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        seconds = value / 1000 if value > 1e11 else value
        return datetime.fromtimestamp(seconds, tz=timezone.utc).isoformat().replace("+00:00", "Z")
    return value if isinstance(value, str) else None
