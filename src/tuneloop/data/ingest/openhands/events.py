"""OpenHands software-agent-sdk conversation folder (`events/event-NNNNN-<id>.json` +
`base_state.json`) → one trace.

Events by `kind`, as the SDK's `LLMConvertibleEvent.events_to_messages` builds the prompt:
- `SystemPromptEvent` / `SystemPromptUpdateEvent` → the system message (prompt text, then the
  `dynamic_context` text). A conversation restored with other tools or another prompt appends
  an update; the SDK sends the latest one, first, on every later call ("latest wins"), and so
  does the trace: its system message is the latest prompt, and each prompt it replaced is kept
  in `metadata.superseded_system_prompts` (record number, reason, text, tool names) — the
  earlier turns were answered under it;
- `MessageEvent` → a user or assistant message (`llm_message` text parts, then
  `extended_content`); consecutive user messages are joined into one, as the SDK sends them;
- `ActionEvent`s of one model response (same `llm_response_id`, in a row: parallel tool calls)
  → one assistant message: the first event's `thought` as text, its `reasoning_content` (or
  Anthropic thinking blocks) as reasoning, every event's `tool_call`;
- `ObservationEvent` → a `tool` message answering its `tool_call_id` (the `observation`'s text
  parts; `is_error` kept); `UserRejectObservation` → "Action rejected: <reason>";
  `AgentErrorEvent` → the error text, `is_error`.
When events carry `parent_id` (conversations with rewinds), only the active branch — the path
from `base_state.leaf_event_id` (else the last event) to the root — is the conversation; the
other events are rejected as `dropped` (abandoned branch). Skipped by kind: state updates,
pauses and interrupts, token ids, completion logs, streaming deltas, hook runs, conversation
errors, condensation bookkeeping, external-agent (ACP) tool calls.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuneloop.data.ingest.base import Reject
from tuneloop.data.ingest.chat import iso_time
from tuneloop.data.ingest.documents import Parsed, load_json_document, reject
from tuneloop.errors import InputError
from tuneloop.records.trace import Message, ToolCall, Trace

EVENT_FILE = re.compile(r"^event-(?P<idx>\d{5,})-(?P<id>[0-9A-Za-z\-]{8,})\.json$")
"""The SDK's event file name (`persistence_const.EVENT_NAME_RE`)."""
SKIP_KINDS = {
    "ConversationStateUpdateEvent": "state update",
    "PauseEvent": "pause",
    "InterruptEvent": "pause",
    "TokenEvent": "token ids",
    "LLMCompletionLogEvent": "completion log",
    "StreamingDeltaEvent": "streaming delta",
    "HookExecutionEvent": "hook",
    "ConversationErrorEvent": "conversation error",
    "Condensation": "condensation",
    "CondensationRequest": "condensation",
    "CondensationSummaryEvent": "condensation",
    "ACPToolCallEvent": "acp tool call",
}
SYSTEM_KINDS = ("SystemPromptEvent", "SystemPromptUpdateEvent")
RESULT_KINDS = ("ObservationEvent", "UserRejectObservation", "AgentErrorEvent")
Record = tuple[int, Path, dict[str, Any]]


def _obj(value: Any) -> dict[str, Any]:
    """`value` if it is a JSON object, else an empty one (absent or wrong-typed fields)."""
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def events_dir(folder: Path) -> Path | None:
    """The folder's event folder (`<folder>/events`, or the folder itself), or None."""
    for candidate in (folder / "events", folder):
        if candidate.is_dir() and any(
            EVENT_FILE.match(entry.name)
            for _, entry in zip(range(64), candidate.iterdir(), strict=False)
        ):
            return candidate
    return None


def _records(folder: Path, parsed: Parsed) -> list[Record]:
    """Event files in index order (then other files, rejected), numbered from 1."""
    named: list[tuple[int, Path]] = []
    other: list[tuple[int, Path]] = []
    for path in folder.iterdir():
        if path.name.startswith(".") or not path.is_file():
            continue  # `.eventlog.lock`: the writer's lock file, not an event
        m = EVENT_FILE.match(path.name)
        (named if m else other).append((int(m["idx"]) if m else 0, path))
    ordered = [p for _, p in sorted(named)] + sorted(p for _, p in other)
    parsed.records = len(ordered)
    out: list[Record] = []
    for n, path in enumerate(ordered, start=1):
        if not EVENT_FILE.match(path.name):
            reason = "not an event file (event-NNNNN-<id>.json)"
            parsed.rejects.append(Reject(str(path), n, reason, "unsupported"))
            continue
        try:
            event = json.loads(path.read_bytes().decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
            parsed.rejects.append(reject(path, n, f"event file is not JSON ({err})"))
            continue
        if not isinstance(event, dict) or not isinstance(event.get("kind"), str):
            parsed.rejects.append(reject(path, n, "event without a kind", event))
            continue
        out.append((n, path, event))
    return out


def _active_branch(records: list[Record], leaf: Any, parsed: Parsed) -> list[Record]:
    """The records on the path from the leaf to the root; the others rejected as dropped."""
    if not any(e.get("parent_id") is not None for _, _, e in records):
        return records
    by_id = {r[2].get("id"): (i, r) for i, r in enumerate(records)}
    node: tuple[int, Record] | None = by_id.get(leaf) or (len(records) - 1, records[-1])
    on_path: set[int] = set()
    while node is not None and node[0] not in on_path:
        i, (_, _, event) = node
        on_path.add(i)
        parent = event.get("parent_id")
        if parent == "__root__" or (parent is None and i == 0):
            break
        node = by_id.get(parent) if parent is not None else (i - 1, records[i - 1])
    for i, (n, path, _) in enumerate(records):
        if i not in on_path:
            reason = "abandoned branch (not on the conversation's active path)"
            parsed.rejects.append(Reject(str(path), n, reason, "dropped"))
    return [r for i, r in enumerate(records) if i in on_path]


def _text(parts: Any) -> str:
    """Text of an SDK content list (`TextContent` / `ImageContent` items)."""
    if isinstance(parts, dict):
        parts = [parts]
    out = []
    for part in parts if isinstance(parts, list) else []:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            out.append(part["text"])
        elif isinstance(part, dict) and part.get("type") == "image":
            out.extend("[image]" for _ in part.get("image_urls") or [None])
    return "\n".join(out)


@dataclass
class _Build:
    keep_reasoning: bool
    messages: list[Message] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    system: tuple[int, dict[str, Any]] | None = None
    superseded: list[dict[str, Any]] = field(default_factory=list)
    skipped_blocks: dict[str, int] = field(default_factory=dict)
    response_id: Any = None
    """The `llm_response_id` of the assistant message last made (parallel calls join it)."""

    def add(self, n: int, message: Message) -> None:
        self.messages.append(message)
        self.lines.append(n)
        self.response_id = None

    def count(self, kind: str) -> None:
        self.skipped_blocks[kind] = self.skipped_blocks.get(kind, 0) + 1


def _reasoning(b: _Build, event: dict[str, Any]) -> str | None:
    """Visible reasoning of a model response; encrypted parts only counted."""
    thinking = [t for t in _list(event.get("thinking_blocks")) if isinstance(t, dict)]
    item = event.get("responses_reasoning_item")
    for block in thinking:
        if block.get("type") == "redacted_thinking":
            b.count("encrypted reasoning")
    if isinstance(item, dict) and item.get("encrypted_content"):
        b.count("encrypted reasoning")
    text = event.get("reasoning_content")
    if not isinstance(text, str) or not text:
        text = "\n".join(t["thinking"] for t in thinking if isinstance(t.get("thinking"), str))
    if not text and isinstance(item, dict):
        text = "\n".join(_text(item.get("summary")).splitlines())
    if not b.keep_reasoning:
        return None
    return text or None


def _action(b: _Build, n: int, event: dict[str, Any]) -> None:
    call = _obj(event.get("tool_call"))
    action = _obj(event.get("action"))
    arguments = call.get("arguments")
    if not isinstance(arguments, str):
        arguments = json.dumps({k: v for k, v in action.items() if k != "kind"})
    tool_call = ToolCall(
        id=str(call.get("id") or event.get("tool_call_id") or f"event-{event.get('id')}"),
        name=str(call.get("name") or event.get("tool_name") or action.get("kind")),
        arguments=arguments,
    )
    rid = event.get("llm_response_id")
    last = b.messages[-1] if b.messages else None
    if rid is not None and rid == b.response_id and last is not None and last.role == "assistant":
        last.tool_calls = [*(last.tool_calls or []), tool_call]
        b.lines.append(n)
        return
    text = _text(event.get("thought"))
    message = Message(role="assistant", content=text or None, tool_calls=[tool_call])
    message.reasoning = _reasoning(b, event)
    b.add(n, message)
    b.response_id = rid


def _result(b: _Build, n: int, event: dict[str, Any], kind: str) -> None:
    if kind == "UserRejectObservation":
        text, error = f"Action rejected: {event.get('rejection_reason') or ''}", True
    elif kind == "AgentErrorEvent":
        text, error = str(event.get("error") or ""), True
    else:
        obs = _obj(event.get("observation"))
        extra = _text(event.get("extended_content"))
        text = "\n".join(t for t in (_text(obs.get("content")), extra) if t)
        error = bool(obs.get("is_error"))
    message = Message(
        role="tool",
        content=text,
        tool_call_id=str(event.get("tool_call_id")),
        name=event.get("tool_name") if isinstance(event.get("tool_name"), str) else None,
        is_error=error or None,
    )
    b.add(n, message)


def _message(b: _Build, n: int, event: dict[str, Any]) -> None:
    llm = _obj(event.get("llm_message"))
    role = llm.get("role") if llm.get("role") in ("user", "assistant", "system") else "user"
    text = "\n".join(
        t for t in (_text(llm.get("content")), _text(event.get("extended_content"))) if t
    )
    last = b.messages[-1] if b.messages else None
    if role == "user" and last is not None and last.role == "user":
        last.content = f"{last.content}\n{text}" if last.content else text
        b.lines.append(n)
        b.response_id = None
        return
    message = Message(role=role, content=text)
    if role == "assistant":
        message.reasoning = _reasoning(b, llm)
    b.add(n, message)


def _system(b: _Build, n: int, event: dict[str, Any]) -> None:
    if b.system is not None:
        old_n, old = b.system
        b.superseded.append(
            {
                "record": old_n,
                "reason": old.get("reason"),
                "text": _system_text(old),
                "tools": _tool_names(old),
            }
        )
    b.system = (n, event)
    b.lines.append(n)


def _system_text(event: dict[str, Any]) -> str:
    parts = (_text(event.get("system_prompt")), _text(event.get("dynamic_context")))
    return "\n\n".join(p for p in parts if p)


def _tool_names(event: dict[str, Any]) -> list[str]:
    tools = _list(event.get("tools"))
    return [str(t.get("title") or t.get("name")) for t in tools if isinstance(t, dict)]


def _base_state(folder: Path) -> dict[str, Any]:
    path = folder / "base_state.json"
    state = load_json_document(path) if path.is_file() else {}
    if not isinstance(state, dict):
        raise InputError(f"{path}: expected a JSON object (the conversation's base state)")
    return state


def read_conversation(folder: Path, events: Path, *, keep_reasoning: bool) -> Parsed:
    """One SDK conversation folder → its trace, rejects and skipped records."""
    state = _base_state(folder if events != folder else folder.parent)
    parsed = Parsed()
    records = _active_branch(_records(events, parsed), state.get("leaf_event_id"), parsed)
    b = _Build(keep_reasoning)
    for n, path, event in records:
        kind = event["kind"]
        if kind in SKIP_KINDS:
            parsed.skip(SKIP_KINDS[kind])
        elif kind in SYSTEM_KINDS:
            _system(b, n, event)
        elif kind == "MessageEvent":
            _message(b, n, event)
        elif kind == "ActionEvent":
            _action(b, n, event)
        elif kind in RESULT_KINDS:
            _result(b, n, event, kind)
        else:
            reason = f"event kind {kind!r} is not a conversation turn"
            parsed.rejects.append(Reject(str(path), n, reason, "unsupported"))
    if b.messages:
        parsed.traces.append(_trace(folder, state, b, records))
    else:
        reason = "conversation has no turns"
        parsed.rejects.extend(Reject(str(folder), n, reason, "dropped") for n in b.lines)
    return parsed


def _trace(folder: Path, state: dict[str, Any], b: _Build, records: list[Record]) -> Trace:
    messages = b.messages
    meta: dict[str, Any] = {"format": "sdk"}
    if b.system is not None:
        messages = [Message(role="system", content=_system_text(b.system[1])), *messages]
        meta["tool_names"] = _tool_names(b.system[1])
    if b.superseded:
        meta["superseded_system_prompts"] = b.superseded
    if b.skipped_blocks:
        meta["skipped_blocks"] = b.skipped_blocks
    sid = str(state.get("id") or folder.name)
    meta["session_id"] = sid
    agent = _obj(state.get("agent"))
    llm = _obj(agent.get("llm"))
    cost = _cost(state)
    if cost is not None:
        meta["cost_usd"] = cost
    stamps = [e["timestamp"] for _, _, e in records if isinstance(e.get("timestamp"), str)]
    return Trace(
        source="openhands",
        source_id=sid,
        source_file=str(folder),
        source_lines=sorted(set(b.lines)),
        messages=messages,
        model=llm.get("model") if isinstance(llm.get("model"), str) else None,
        started_at=iso_time(stamps[0]) if stamps else None,
        ended_at=iso_time(stamps[-1]) if stamps else None,
        metadata=meta,
    )


def _cost(state: dict[str, Any]) -> float | None:
    stats = _obj(state.get("stats"))
    usage = _obj(stats.get("usage_to_metrics"))
    costs = [
        m["accumulated_cost"]
        for m in usage.values()
        if isinstance(m, dict) and isinstance(m.get("accumulated_cost"), int | float)
    ]
    return float(sum(costs)) if costs else None
