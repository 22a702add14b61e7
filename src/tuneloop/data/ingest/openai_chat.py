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
`rating`, `score` or `label`, and from feedback lines:
- `{"type": "feedback", "completion_id": ..., "verdict"/"score"/"correction": ...}` as the
  traffic log (`tuneloop.serve.traffic`) appends them. One is joined to the exchange whose
  response id (all its choices) or trace id (`<id>#<index>`: one choice) it names, anywhere
  in the same file — before or after it; the line joins that trace's `source_lines`. When
  several name one completion the last line wins (a user who changed their mind), and it
  replaces feedback written inside the exchange line. `correction` (the right answer) is kept
  as `Feedback.correction`.
  Deliberately joined within one file only: ingest accounts for lines per file, so feedback
  whose exchange is in another file (a rotated `traffic-<n>.jsonl`) is a `dropped` reject
  that names the id, never silently lost — as is feedback for an id that appears nowhere.
A verifiable answer is read from a top-level (or `metadata.`) `reference` or `answer` (a
string or number, or an object `{answer, scorer, scorer_args}`), with `scorer` and
`scorer_args` beside it; it becomes `Trace.reference` (a corpus build's GRPO prompt set).
Text completions (`prompt` → `text`, no chat messages) are `unsupported` rejects. A feedback
field (`rating`, `score`, …) holding a number no scale accepts (a rating of 7) rejects its line
rather than leaving the trace silently unrated.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tuneloop.data.ingest.base import (
    Converter,
    Joined,
    Lines,
    Reject,
    check_options,
    excerpt,
    line_ingester,
)
from tuneloop.data.ingest.chat import BadMessage, iso_time, to_messages
from tuneloop.data.ingest.detect import sniff_lines
from tuneloop.data.ingest.feedback import normalize_feedback
from tuneloop.errors import InputError
from tuneloop.records.trace import Feedback, Message, Reference, Trace

TraceIndex = dict[str, list[Trace]]
"""Completion or trace id → the traces that feedback naming it applies to (none: a text
completion's id)."""
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
                if isinstance(value, int | float) and not isinstance(value, bool):
                    raise BadMessage(
                        f"{key} {value!r} is out of range (a score in [0, 1], a rating 1..5, "
                        "or -1 / 1 thumbs)"
                    )
    return None


def find_reference(obj: dict[str, Any]) -> Reference | None:
    """The verifiable answer logged at the top level or under `metadata`; BadMessage when a
    field is there but of the wrong shape (a reject naming it, never a silent loss)."""
    meta = obj.get("metadata")
    for holder in [obj, meta] if isinstance(meta, dict) else [obj]:
        for key in ("reference", "answer"):
            value = holder.get(key)
            if value is None:
                continue
            fields = value if isinstance(value, dict) else {"answer": value}
            fields = {
                "scorer": holder.get("scorer"),
                "scorer_args": holder.get("scorer_args") or {},
                **fields,
            }
            if isinstance(fields.get("answer"), (int, float)) and not isinstance(
                fields["answer"], bool
            ):
                fields["answer"] = str(fields["answer"])
            try:
                return Reference.model_validate(fields)
            except ValidationError as err:
                raise BadMessage(
                    f"{key}: not a reference answer ({err.errors()[0]['msg']})"
                ) from None
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
    file: str, lineno: int, obj: dict[str, Any], first_only: bool, by_id: TraceIndex
) -> Iterator[Trace | Reject]:
    """The traces of one {request, response} line; each is also filed in `by_id` under the
    response id (the completion id that feedback names)."""
    request, response = _body(obj["request"]), _body(obj["response"])
    if isinstance(request, dict) and "messages" not in request and "prompt" in request:
        reason = "a text completion (prompt → text), not a chat exchange"
        if isinstance(response, dict) and isinstance(response.get("id"), str):
            by_id.setdefault(response["id"], [])  # so that its feedback is named for what it is
        yield Reject(file, lineno, reason, "unsupported", excerpt(obj))
        return
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
        trace = Trace(
            source="openai_chat",
            source_id=rid if len(choices) == 1 or first_only else f"{rid}#{i}",
            source_file=file,
            source_lines=[lineno],
            messages=[*prompt, *reply],
            model=response.get("model") or request.get("model"),
            started_at=_first_time(obj) or iso_time(response.get("created")),
            ended_at=iso_time(response.get("created")),
            feedback=find_feedback(obj),
            reference=find_reference(obj),
            metadata=_extras(request, choice),
        )
        by_id.setdefault(rid, []).append(trace)
        # `<id>#<i>` names one choice, also of a one-choice response (the server accepts it)
        by_id.setdefault(f"{rid}#{i}", []).append(trace)
        yield trace


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
        reference=find_reference(obj),
        metadata={"tools": obj["tools"]} if obj.get("tools") else {},
    )


def looks_like_openai_chat(path: Path) -> bool:
    """A JSONL file whose first lines are exchanges ({request, response}) or conversations."""
    lines = sniff_lines(path)
    return bool(lines) and all(
        ("request" in o and "response" in o)
        or isinstance(o.get("messages"), list)
        or o.get("type") == "feedback"
        for o in lines
    )


@line_ingester("openai_chat", detect=looks_like_openai_chat)
def openai_chat(**options: Any) -> Converter:
    """OpenAI chat-completions logs ({request, response} pairs or {messages})."""
    check_options("openai_chat", options, {"choices"})
    if options.get("choices", "all") not in ("all", "first"):
        raise InputError("ingester 'openai_chat': option choices must be 'all' or 'first'")
    first_only = options.get("choices") == "first"

    earlier: TraceIndex = {}  # the traces of the files read before, by id

    def convert(file: str, lines: Lines) -> Iterator[Trace | Reject | Joined]:
        traces: list[Trace] = []  # held back until every feedback line of the file is read
        feedback: list[tuple[int, dict[str, Any]]] = []
        by_id: TraceIndex = {}
        for lineno, obj in lines:
            if obj.get("type") == "feedback":
                feedback.append((lineno, obj))
                continue
            for out in _line(file, lineno, obj, first_only, by_id):
                if isinstance(out, Trace):
                    traces.append(out)
                else:
                    yield out
        yield from join_feedback(file, by_id, feedback, earlier)
        yield from traces
        for cid, found in by_id.items():
            earlier.setdefault(cid, []).extend(found)

    return convert


def _line(
    file: str, lineno: int, obj: dict[str, Any], first_only: bool, by_id: TraceIndex
) -> Iterator[Trace | Reject]:
    try:
        if "request" in obj and "response" in obj:
            yield from _exchange(file, lineno, obj, first_only, by_id)
        elif "messages" in obj:
            trace = _conversation(file, lineno, obj)
            by_id.setdefault(trace.source_id, []).append(trace)
            yield trace
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


def join_feedback(
    file: str,
    by_id: TraceIndex,
    lines: list[tuple[int, dict[str, Any]]],
    earlier: TraceIndex | None = None,
) -> Iterator[Reject | Joined]:
    """Attach each feedback line to the traces `by_id` (this file) or else `earlier` (files
    read before) files under its id, in place; reject the others. Lines are applied in line
    order, so the last one wins; a line joined to an earlier file's trace is `Joined`."""
    earlier = earlier or {}
    for lineno, obj in sorted(lines, key=lambda item: item[0]):
        cid = obj.get("completion_id")
        try:
            fb = feedback_line(obj)
        except ValueError as err:
            yield Reject(file, lineno, f"bad feedback — {err}", excerpt=excerpt(obj))
            continue
        if not isinstance(cid, str) or not cid:
            reason = "feedback line without a completion_id string"
            yield Reject(file, lineno, reason, excerpt=excerpt(obj))
        elif not (by_id.get(cid) or earlier.get(cid)) and (cid in by_id or cid in earlier):
            reason = f"feedback for completion {cid!r}: a text completion makes no training row"
            yield Reject(file, lineno, reason, "dropped", excerpt(obj))
        elif not by_id.get(cid) and cid in earlier:
            for trace in earlier[cid]:
                trace.feedback = fb
            yield Joined(lineno)
        elif cid not in by_id:
            reason = (
                f"feedback for completion {cid!r}: no exchange with that id in this file or "
                "the files before it — feedback is joined to an exchange read earlier or in "
                "the same file (give a traffic folder, or its files oldest first)"
            )
            yield Reject(file, lineno, reason, "dropped", excerpt(obj))
        else:
            for trace in by_id[cid]:
                trace.feedback = fb
                if lineno not in trace.source_lines:
                    trace.source_lines.append(lineno)


def feedback_line(obj: dict[str, Any]) -> Feedback:
    """The `Feedback` of a traffic log feedback line; ValueError saying what is wrong.

    `verdict` is anything `normalize_feedback` reads as a judgement; an explicit `score` in
    [0, 1] replaces the verdict's score; `correction` is a non-empty string. At least one of
    the three must be present.
    """
    raw = {k: obj[k] for k in ("verdict", "score", "correction") if obj.get(k) is not None}
    if not raw:
        raise ValueError("the line carries no verdict, score or correction")
    verdict = normalize_feedback(raw["verdict"]) if "verdict" in raw else None
    if "verdict" in raw and verdict is None:
        raise ValueError(f"verdict {raw['verdict']!r} is not a judgement (use up or down)")
    score = raw.get("score")
    if score is not None and (
        isinstance(score, bool) or not isinstance(score, (int, float)) or not 0 <= score <= 1
    ):
        raise ValueError(f"score {score!r} is not a number in [0, 1]")
    correction = raw.get("correction")
    if correction is not None and (not isinstance(correction, str) or not correction):
        raise ValueError("correction must be a non-empty string")
    by_score = normalize_feedback(float(score)) if score is not None else None
    return Feedback(
        verdict=verdict.verdict if verdict else by_score.verdict if by_score else None,
        score=float(score) if score is not None else verdict.score if verdict else None,
        raw=raw,
        correction=correction,
    )
