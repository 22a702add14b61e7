"""Ingester `openai_chat`: OpenAI chat-completions logs.

Run: `tuneloop ingest --format openai_chat requests.jsonl --out traces.jsonl`.

One line is one exchange, in either shape:
- `{"request": {...}, "response": {...}}` as a logging proxy writes it. The request is the
  chat-completions body (`messages`, `model`, `tools`); the response is a `chat.completion`
  object, or a list of `chat.completion.chunk` objects from a streamed call (deltas are
  joined). Either side may be wrapped as `{"body": ...}` (Batch API files, proxies that log
  HTTP); a response with `status_code` ≥ 400 or an `error` is rejected. Each response
  choice becomes one trace (`<response id>#<index>`), the request messages followed by the
  choice's message — option `choices: first` keeps only choice 0.
- `{"messages": [...]}` — a finished conversation with `tool_calls` and tool messages.
Feedback is read from a top-level (or `metadata.`) `verdict`, `feedback`, `thumbs`,
`rating`, `score` or `label`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tuneloop.data.ingest.base import Converter, Lines, Reject, check_options, excerpt
from tuneloop.data.ingest.chat import BadMessage, iso_time, to_messages
from tuneloop.data.trace import Feedback, Message, Trace, normalize_feedback
from tuneloop.errors import InputError
from tuneloop.registry import ingesters

FEEDBACK_KEYS = ("verdict", "feedback", "thumbs", "rating", "score", "label")
TIME_KEYS = ("timestamp", "created_at", "time", "start_time", "startTime")


def find_feedback(obj: dict[str, Any]) -> Feedback | None:
    """The first feedback field found at the top level or under `metadata`."""
    meta = obj.get("metadata")
    holders: list[dict[str, Any]] = [obj, meta] if isinstance(meta, dict) else [obj]
    for holder in holders:
        for key in FEEDBACK_KEYS:
            if key in holder:
                # Wrapping keeps a bare `rating: 1` on the 1..5 scale (worst), not a score of 1.
                value = holder[key]
                fb = normalize_feedback({key: value} if key == "rating" else value)
                if fb is not None:
                    return fb
    return None


def _first_time(obj: dict[str, Any]) -> str | None:
    for key in TIME_KEYS:
        if key in obj:
            return iso_time(obj[key])
    return None


def _body(side: Any) -> Any:
    return side["body"] if isinstance(side, dict) and isinstance(side.get("body"), dict) else side


def join_chunks(chunks: list[Any]) -> dict[str, Any]:
    """A streamed response (list of chat.completion.chunk) → one chat.completion object."""
    choices: dict[int, dict[str, Any]] = {}
    head: dict[str, Any] = {}
    for chunk in chunks:
        if not isinstance(chunk, dict):
            raise BadMessage("streamed response holds a non-object chunk")
        head = head or {k: chunk.get(k) for k in ("id", "model", "created")}
        for ch in chunk.get("choices") or []:
            slot = choices.setdefault(
                int(ch.get("index", 0)), {"role": "assistant", "content": "", "tool_calls": {}}
            )
            delta = ch.get("delta") or {}
            slot["content"] += delta.get("content") or ""
            for tc in delta.get("tool_calls") or []:
                acc = slot["tool_calls"].setdefault(
                    int(tc.get("index", 0)), {"id": None, "function": {"name": "", "arguments": ""}}
                )
                acc["id"] = tc.get("id") or acc["id"]
                fn = tc.get("function") or {}
                acc["function"]["name"] += fn.get("name") or ""
                acc["function"]["arguments"] += fn.get("arguments") or ""
            if ch.get("finish_reason"):
                slot["finish_reason"] = ch["finish_reason"]
    out = []
    for index in sorted(choices):
        slot = choices[index]
        calls = [slot["tool_calls"][k] for k in sorted(slot["tool_calls"])]
        message = {
            "role": "assistant",
            "content": slot["content"] or None,
            "tool_calls": calls or None,
        }
        out.append({"index": index, "message": message, "finish_reason": slot.get("finish_reason")})
    return {**head, "choices": out}


def _exchange(
    file: str, lineno: int, obj: dict[str, Any], first_only: bool
) -> Iterator[Trace | Reject]:
    request, response = _body(obj["request"]), _body(obj["response"])
    status = obj["response"].get("status_code") if isinstance(obj["response"], dict) else None
    if (
        isinstance(status, int)
        and status >= 400
        or (isinstance(response, dict) and response.get("error"))
    ):
        yield Reject(
            file, lineno, f"response is an error — status {status}", "dropped", excerpt(obj)
        )
        return
    if isinstance(response, list):
        response = join_chunks(response)
    if not isinstance(request, dict) or not isinstance(response, dict):
        yield Reject(file, lineno, "request and response must be objects", excerpt=excerpt(obj))
        return
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices:
        yield Reject(file, lineno, "response has no choices", excerpt=excerpt(obj))
        return
    prompt = to_messages(request.get("messages"))
    rid = str(response.get("id") or obj.get("id") or f"{Path(file).stem}:{lineno}")
    for i, choice in enumerate(choices[:1] if first_only else choices):
        reply = to_messages([choice.get("message")] if isinstance(choice, dict) else [None])
        yield Trace(
            source="openai_chat",
            source_id=rid if len(choices) == 1 or first_only else f"{rid}#{i}",
            source_file=file,
            source_lines=[lineno],
            messages=[*prompt, *reply],
            model=response.get("model") or request.get("model"),
            started_at=_first_time(obj) or iso_time(response.get("created")),
            ended_at=iso_time(response.get("created")),
            feedback=find_feedback(obj),
            metadata=_extras(request, choice),
        )


def _extras(request: dict[str, Any], choice: Any) -> dict[str, Any]:
    extras: dict[str, Any] = {}
    if request.get("tools"):
        extras["tools"] = request["tools"]
    if isinstance(choice, dict) and choice.get("finish_reason"):
        extras["finish_reason"] = choice["finish_reason"]
    return extras


def _conversation(file: str, lineno: int, obj: dict[str, Any]) -> Trace:
    messages: list[Message] = to_messages(obj["messages"])
    return Trace(
        source="openai_chat",
        source_id=str(obj.get("id") or f"{Path(file).stem}:{lineno}"),
        source_file=file,
        source_lines=[lineno],
        messages=messages,
        model=obj.get("model") if isinstance(obj.get("model"), str) else None,
        started_at=_first_time(obj),
        feedback=find_feedback(obj),
        metadata={"tools": obj["tools"]} if obj.get("tools") else {},
    )


@ingesters.register("openai_chat")
def openai_chat(**options: Any) -> Converter:
    """OpenAI chat-completions logs ({request, response} pairs or {messages})."""
    check_options("openai_chat", options, {"choices"})
    if options.get("choices", "all") not in ("all", "first"):
        raise InputError("ingester 'openai_chat': option choices must be 'all' or 'first'")
    first_only = options.get("choices") == "first"

    def convert(file: str, lines: Lines) -> Iterator[Trace | Reject]:
        for lineno, obj in lines:
            try:
                if "request" in obj and "response" in obj:
                    yield from _exchange(file, lineno, obj, first_only)
                elif "messages" in obj:
                    yield _conversation(file, lineno, obj)
                else:
                    yield Reject(
                        file,
                        lineno,
                        "neither {request, response} nor {messages}",
                        "unsupported",
                        excerpt(obj),
                    )
            except (BadMessage, ValidationError) as err:
                yield Reject(file, lineno, f"bad message — {err}", excerpt=excerpt(obj))

    return convert
