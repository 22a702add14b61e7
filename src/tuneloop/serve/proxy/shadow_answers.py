"""The two answers of a mirrored request, read from what each server sent (`mirror.py`).

    champion = champion_answer(body_bytes, streamed, latency_s)   # .answer, .completion_id
    answer = challenger_answer(status, body_bytes, latency_s)

Pure functions over bytes. A champion answer is the `chat.completion` the user got, or for a
stream the `chat.completion.chunk` events (`traffic.middleware.parse_sse`): the text is choice
0's content (a stream's: its deltas joined), with `usage` and `finish_reason` where present.
A champion answer without text (a tool call only, an unreadable body) is None: there is
nothing to judge. A challenger answer without text is kept, with its error, so that a
failing challenger is counted and shown rather than silently sampled away.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from tuneloop.records.shadow import ShadowAnswer
from tuneloop.serve.traffic.middleware import parse_sse

MAX_ERROR_CHARS = 300


class Reading(NamedTuple):
    """What one completion (or one stream's chunks) says."""

    text: str | None
    finish_reason: str | None
    usage: dict[str, Any]
    completion_id: str | None


class Champion(NamedTuple):
    """The user's answer to a mirrored request."""

    answer: ShadowAnswer
    completion_id: str | None
    """The completion's id (the traffic log's and feedback's name for it), when it has one."""


def champion_answer(data: bytes, streamed: bool, latency_s: float) -> Champion | None:
    """The user's answer, from the bytes relayed; None when it holds no text."""
    try:
        found = _read_stream(parse_sse(data)) if streamed else _read_whole(json.loads(data))
    except (ValueError, UnicodeDecodeError):
        return None
    if found.text is None:
        return None
    return Champion(_answer(found, latency_s), found.completion_id)


def challenger_answer(status: int, data: bytes, latency_s: float) -> ShadowAnswer:
    """The challenger's answer, or its error (an HTTP status, a body without text)."""
    if status != 200:
        excerpt = data[:MAX_ERROR_CHARS].decode("utf-8", errors="replace")
        return ShadowAnswer(text=None, error=f"HTTP {status}: {excerpt}", latency_s=latency_s)
    try:
        found = _read_whole(json.loads(data))
    except (ValueError, UnicodeDecodeError):
        return ShadowAnswer(text=None, error="the body is not JSON", latency_s=latency_s)
    if found.text is None:
        error = "no text in choices[0].message.content"
        return ShadowAnswer(text=None, error=error, latency_s=latency_s)
    return _answer(found, latency_s)


def _answer(found: Reading, latency_s: float) -> ShadowAnswer:
    usage = found.usage
    return ShadowAnswer(
        text=found.text,
        latency_s=latency_s,
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
        finish_reason=found.finish_reason,
    )


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _read_whole(completion: Any) -> Reading:
    if not isinstance(completion, dict):
        return Reading(None, None, {}, None)
    choice = _choice0(completion)
    message = choice.get("message")
    text = message.get("content") if isinstance(message, dict) else None
    return Reading(
        text if isinstance(text, str) else None,
        _str(choice.get("finish_reason")),
        completion["usage"] if isinstance(completion.get("usage"), dict) else {},
        _str(completion.get("id")),
    )


def _read_stream(chunks: list[Any]) -> Reading:
    parts: list[str] = []
    finish, usage, cid = None, {}, None
    for chunk in chunks:
        if not isinstance(chunk, dict):
            continue
        cid = cid or _str(chunk.get("id"))
        if isinstance(chunk.get("usage"), dict):
            usage = chunk["usage"]
        choice = _choice0(chunk)
        delta = choice.get("delta")
        if isinstance(delta, dict) and isinstance(delta.get("content"), str):
            parts.append(delta["content"])
        finish = _str(choice.get("finish_reason")) or finish
    return Reading("".join(parts) if parts else None, finish, usage, cid)


def _choice0(obj: dict[str, Any]) -> dict[str, Any]:
    choices = obj.get("choices")
    if not isinstance(choices, list):
        return {}
    for choice in choices:
        if isinstance(choice, dict) and choice.get("index", 0) == 0:
            return choice
    return {}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
