"""OpenHands trajectory JSON (the event stream of OpenHands ≤ 0.x) → one trace.

Each event is an action (`action`: message, system, run, read, edit, think, finish, …) or an
observation (`observation`, with `cause` = the id of the action it answers). Conversion, in
event order, as OpenHands' own `ConversationMemory` builds the prompt:
- `system` → the system message (its `args.tools`, OpenAI tool entries, → `metadata.tools`);
  `message` → a user or assistant message (`args.content`; images as `[image]`);
- an action with `tool_call_metadata` → the assistant message of its model response
  (`model_response.choices[0].message`: text, reasoning, every tool call). Actions sharing one
  response (parallel tool calls) make one message, as do the response copies on observations;
- an agent action without it (OpenHands before native tool calling) → an assistant message
  calling a tool named after the action, with `args` as arguments and id `event-<id>`;
- an observation answering a call → a `tool` message (by the action's tool call id, found
  through `cause`; `error` observations marked `is_error`); `run` output is rendered as the
  model saw it (prefix + output + suffix, e.g. "[The command completed with exit code 0.]");
  an observation answering no call (a command the user ran) → a user message;
- `finish` without a model response → an assistant message of its final thought.
Skipped by kind: agent state changes, empty (`null`) observations, recall (workspace context
rendered from templates, not stored as text), condensation, loop recovery, a user's `/exit`,
and duplicate event ids. Rejected: events that are not objects or carry neither `action` nor
`observation` (`malformed`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuneloop.data.ingest.base import Reject
from tuneloop.data.ingest.chat import BadMessage, content_text, to_messages
from tuneloop.data.ingest.documents import Parsed, load_json_document, reject
from tuneloop.errors import InputError
from tuneloop.records.trace import Message, ToolCall, Trace

SKIP_ACTIONS = {
    "change_agent_state": "agent state",
    "recall": "recall",
    "condensation": "condensation",
    "condensation_request": "condensation",
}
SKIP_OBSERVATIONS = {
    "agent_state_changed": "agent state",
    "null": "empty observation",
    "recall": "recall",
    "condense": "condensation",
    "agent_condensation": "condensation",
    "loop_detection": "loop recovery",
}
SESSION_KEYS = ("id", "conversation_id", "session_id", "instance_id")


def _obj(value: Any) -> dict[str, Any]:
    """`value` if it is a JSON object, else an empty one (absent or wrong-typed fields)."""
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _events(path: Path) -> tuple[list[Any], dict[str, Any]]:
    doc = load_json_document(path)
    if isinstance(doc, list):
        return doc, {}
    if isinstance(doc, dict):
        for key in ("history", "trajectory"):
            if isinstance(doc.get(key), list):
                return doc[key], doc
    raise InputError(
        f"{path}: not an OpenHands trajectory (expected a list of events, or an object with "
        "a `history` or `trajectory` list)"
    )


@dataclass
class _Build:
    """The messages of one trajectory as they are built, with what pairs results to calls."""

    keep_reasoning: bool
    messages: list[Message] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    by_response: dict[str, Message] = field(default_factory=dict)
    call_of_action: dict[Any, str] = field(default_factory=dict)
    """Action event id → the tool call id it executes."""
    model: str | None = None
    tools: Any = None
    calls: set[str] = field(default_factory=set)
    """Every tool call id made so far (a result naming another one is not a tool message)."""
    copies: int = 0
    encrypted: int = 0
    """Encrypted reasoning blocks (Anthropic `redacted_thinking`) left out of the messages."""
    cost: float | None = None

    def add(self, n: int, message: Message) -> None:
        if not self.keep_reasoning:
            message.reasoning = None
        self.calls.update(c.id for c in message.tool_calls or [])
        self.messages.append(message)
        self.lines.append(n)

    def model_response(self, n: int, event: dict[str, Any], meta: dict[str, Any]) -> None:
        """The assistant message of an action's model response (made once per response)."""
        response = _obj(meta.get("model_response"))
        choices = _list(response.get("choices"))
        if not choices or not isinstance(choices[0], dict):
            raise BadMessage("tool_call_metadata.model_response has no choices")
        rid = str(response.get("id") or f"event-{event.get('id')}")
        call_id = str(meta.get("tool_call_id") or f"event-{event.get('id')}")
        self.call_of_action[event.get("id")] = call_id
        if isinstance(response.get("model"), str):
            self.model = response["model"]
        if rid in self.by_response:
            self.copies += 1
            self.lines.append(n)
            return
        reply = dict(choices[0].get("message") or {}, role="assistant")
        (message,) = to_messages([reply])
        blocks = _list(reply.get("thinking_blocks"))
        self.encrypted += sum(_obj(t).get("type") == "redacted_thinking" for t in blocks)
        self.by_response[rid] = message
        self.add(n, message)


def _run_output(event: dict[str, Any]) -> str:
    extras = _obj(event.get("extras"))
    meta = _obj(extras.get("metadata"))
    prefix, suffix = meta.get("prefix") or "", meta.get("suffix") or ""
    return f"{prefix}{event.get('content') or ''}{suffix}"


def _action(b: _Build, n: int, event: dict[str, Any], kind: str) -> None:
    args = _obj(event.get("args"))
    source = event.get("source")
    meta = event.get("tool_call_metadata")
    if kind == "system":
        b.tools = args.get("tools") or b.tools
        b.add(n, Message(role="system", content=str(args.get("content") or event.get("message"))))
    elif isinstance(meta, dict):
        b.model_response(n, event, meta)
    elif kind == "message":
        text = args.get("content") if "content" in args else event.get("message")
        images = ["[image]" for _ in args.get("image_urls") or []]
        role = "user" if source == "user" else "assistant"
        b.add(n, Message(role=role, content="\n".join([str(text or ""), *images])))
    elif kind == "finish":
        thought = args.get("final_thought") or args.get("thought") or event.get("message")
        b.add(n, Message(role="assistant", content=str(thought or "")))
    elif source == "user":
        b.add(n, Message(role="user", content=str(event.get("message") or "")))
    else:  # an agent action of OpenHands before native tool calling
        call_id = f"event-{event.get('id')}"
        b.call_of_action[event.get("id")] = call_id
        arguments = {k: v for k, v in args.items() if k != "thought"}
        call = ToolCall(id=call_id, name=kind, arguments=json.dumps(arguments, ensure_ascii=False))
        b.add(n, Message(role="assistant", content=args.get("thought") or None, tool_calls=[call]))


def _observation(b: _Build, n: int, event: dict[str, Any], kind: str) -> None:
    text = _run_output(event) if kind == "run" else content_text(event.get("content")) or ""
    meta = event.get("tool_call_metadata")
    call_id = b.call_of_action.get(event.get("cause"))
    if call_id is None and isinstance(meta, dict) and meta.get("tool_call_id"):
        call_id = str(meta["tool_call_id"])
    if isinstance(meta, dict) and meta.get("model_response"):
        b.copies += 1  # the same response as the action's: never a second message
    if call_id is None or call_id not in b.calls:
        b.add(n, Message(role="user", content=text))
        return
    name = meta.get("function_name") if isinstance(meta, dict) else None
    is_error = True if kind == "error" else None
    b.add(n, Message(role="tool", content=text, tool_call_id=call_id, name=name, is_error=is_error))


def read_trajectory(path: Path, *, keep_reasoning: bool) -> Parsed:
    """One trajectory file → its trace, rejects and skipped records."""
    events, holder = _events(path)
    parsed = Parsed(records=len(events))
    b = _Build(keep_reasoning)
    seen: set[Any] = set()
    stamps: list[str] = []
    for n, event in enumerate(events, start=1):
        if not isinstance(event, dict):
            parsed.rejects.append(reject(path, n, "event is not a JSON object", event))
            continue
        action, observation = event.get("action"), event.get("observation")
        if not isinstance(action, str) and not isinstance(observation, str):
            reason = "event has neither action nor observation"
            parsed.rejects.append(reject(path, n, reason, event))
            continue
        if event.get("id") is not None and event["id"] in seen:
            parsed.skip("duplicate event")
            continue
        seen.add(event.get("id"))
        if action == "finish" and event.get("source") == "user":
            parsed.skip("user exit")
            continue
        skip = SKIP_ACTIONS.get(action) if action else SKIP_OBSERVATIONS.get(str(observation))
        if skip is not None:
            parsed.skip(skip)
            continue
        metrics = event.get("llm_metrics")
        if isinstance(metrics, dict) and isinstance(metrics.get("accumulated_cost"), int | float):
            b.cost = float(metrics["accumulated_cost"])
        try:
            if isinstance(action, str):
                _action(b, n, event, action)
            else:
                _observation(b, n, event, str(observation))
        except BadMessage as err:
            parsed.rejects.append(reject(path, n, f"bad model response — {err}", event))
            continue
        if isinstance(event.get("timestamp"), str):
            stamps.append(event["timestamp"])
    if b.messages:
        parsed.traces.append(_trace(path, holder, b, stamps))
    else:
        reason = "trajectory has no conversation turns"
        parsed.rejects.extend(Reject(str(path), n, reason, "dropped") for n in b.lines)
    return parsed


def _trace(path: Path, holder: dict[str, Any], b: _Build, stamps: list[str]) -> Trace:
    sid = next((str(holder[k]) for k in SESSION_KEYS if holder.get(k) not in (None, "")), None)
    meta: dict[str, Any] = {"session_id": sid or path.stem, "format": "trajectory"}
    if isinstance(b.tools, list) and b.tools:
        meta["tools"] = b.tools
    if b.encrypted:
        meta["skipped_blocks"] = {"encrypted reasoning": b.encrypted}
    if b.copies:
        meta["model_response_copies"] = b.copies
    if b.cost is not None:
        meta["cost_usd"] = b.cost
    return Trace(
        source="openhands",
        source_id=sid or path.stem,
        source_file=str(path),
        source_lines=sorted(set(b.lines)),
        messages=b.messages,
        model=b.model,
        started_at=stamps[0] if stamps else None,
        ended_at=stamps[-1] if stamps else None,
        metadata=meta,
    )
