"""A Claude Code thread's records → one canonical trace (see the package docstring)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from tuneloop.data.ingest.base import Reject, excerpt
from tuneloop.data.ingest.chat import content_text
from tuneloop.data.ingest.claude_code.threads import (
    SKIPPED,
    TURNS,
    Entry,
    Thread,
    blocks,
    message_id,
)
from tuneloop.data.ingest.documents import Parsed
from tuneloop.records.trace import Message, ToolCall, Trace


def tool_result_text(block: dict[str, Any]) -> str:
    """The text of a tool_result block (a string, text parts, or other JSON as JSON)."""
    content = block.get("content")
    text = (
        content_text(content)
        if isinstance(content, (str, list)) or content is None
        else json.dumps(content)
    )
    return text or ""


class Builder:
    """Accumulates messages from a thread's turn records, merging split assistant messages."""

    def __init__(self, keep_reasoning: bool) -> None:
        self.keep_reasoning = keep_reasoning
        self.messages: list[Message] = []
        self.compactions: list[dict[str, Any]] = []
        self.model: str | None = None
        self.skipped_blocks: Counter[str] = Counter()
        """Assistant content blocks of kinds not converted (server-tool blocks, images, …)."""
        self._open: tuple[str, int] | None = None  # (message.id, index) of the last assistant

    def add_user(self, obj: dict[str, Any]) -> None:
        content = obj["message"].get("content")
        if obj.get("isCompactSummary"):
            summary = content_text(content) or ""
            self.compactions.append({"at_message": len(self.messages), "summary": summary})
            return
        items = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
        text: list[str] = []
        for block in items:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                self._flush_user(text)
                self.messages.append(
                    Message(
                        role="tool",
                        content=tool_result_text(block),
                        tool_call_id=str(block.get("tool_use_id")),
                        is_error=bool(block.get("is_error")) or None,
                    )
                )
            else:
                text.append(content_text([block]) or "")
        self._flush_user(text)

    def _flush_user(self, text: list[str]) -> None:
        if text:
            self.messages.append(Message(role="user", content="\n".join(text)))
            text.clear()

    def add_assistant(self, obj: dict[str, Any]) -> str | None:
        """Merge one assistant record; the skip kind when it added nothing, else None."""
        msg = obj["message"]
        if isinstance(msg.get("model"), str) and msg["model"] != "<synthetic>":
            self.model = msg["model"]
        content = msg.get("content")
        items = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
        parts: list[tuple[str, Any]] = []
        hidden = dropped = 0
        for block in items:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text":
                parts.append(("text", block.get("text") or ""))
            elif kind == "thinking" and (block.get("thinking") or "").strip():
                dropped += not self.keep_reasoning
                if self.keep_reasoning:
                    parts.append(("reasoning", block["thinking"]))
            elif kind in ("thinking", "redacted_thinking"):
                hidden += 1
            elif kind == "tool_use":
                args = json.dumps(block.get("input") or {}, ensure_ascii=False)
                call = ToolCall(
                    id=str(block.get("id")), name=str(block.get("name")), arguments=args
                )
                parts.append(("call", call))
            else:
                self.skipped_blocks[str(kind)] += 1
        if not parts and (hidden or dropped):
            return "reasoning dropped" if dropped else "encrypted reasoning"
        if hidden:
            self.skipped_blocks["encrypted reasoning"] += hidden
        self._merge(message_id(obj), parts)
        return None

    def _merge(self, mid: str | None, parts: list[tuple[str, Any]]) -> None:
        """Into the open message of the same API message when only tool results followed it."""
        at = self._open[1] if self._open and mid is not None and self._open[0] == mid else None
        if at is None or any(m.role != "tool" for m in self.messages[at + 1 :]):
            self.messages.append(Message(role="assistant", content=None))
            at = len(self.messages) - 1
        self._open = (mid, at) if mid is not None else None
        target = self.messages[at]
        for kind, value in parts:
            if kind == "text" and value.strip():
                target.content = join(target.content, value)
            elif kind == "reasoning":
                target.reasoning = join(target.reasoning, value)
            elif kind == "call":
                target.tool_calls = [*(target.tool_calls or []), value]

    def finish(self) -> list[Message]:
        """The messages, each run of tool results in the order of the calls before it."""
        out = self.messages
        for i, m in enumerate(out):
            if m.role == "assistant" and m.tool_calls:
                order = {c.id: k for k, c in enumerate(m.tool_calls)}
                j = i + 1
                while j < len(out) and out[j].role == "tool":
                    j += 1
                out[i + 1 : j] = sorted(
                    out[i + 1 : j], key=lambda t: order.get(t.tool_call_id or "", len(order))
                )
        return out


def join(a: str | None, b: str) -> str:
    """Two texts of one message, a line apart."""
    return b if not a else f"{a}\n{b}"


def build_trace(
    file: str, sid: str, thread: Thread, path: list[Entry], keep_reasoning: bool, parsed: Parsed
) -> Trace | None:
    """The thread's trace; rejects and skips of its records go to `parsed`."""
    b = Builder(keep_reasoning)
    lines: list[int] = []
    subagents: dict[str, str] = {}
    for lineno, obj in path:
        kind = obj["type"]
        if kind not in TURNS:
            if obj.get("subtype") == "compact_boundary":
                lines.append(lineno)
            else:
                parsed.skip(SKIPPED[kind])
            continue
        if kind == "assistant" and obj.get("isApiErrorMessage"):
            reason = "synthetic API-error message (not model output)"
            parsed.rejects.append(Reject(file, lineno, reason, "dropped", excerpt(obj)))
            continue
        skip = b.add_assistant(obj) if kind == "assistant" else None
        if kind == "user":
            b.add_user(obj)
        if skip:
            parsed.skip(skip)
            continue
        lines.append(lineno)
        agent = obj.get("toolUseResult")
        if isinstance(agent, dict) and isinstance(agent.get("agentId"), str):
            for call in blocks(obj, "tool_result", "tool_use_id"):
                subagents[call] = f"{sid}:agent:{agent['agentId']}"
    messages = b.finish()
    if not messages:
        parsed.rejects.extend(
            Reject(file, n, "thread has no conversation turns", "dropped") for n in lines
        )
        return None
    first, last = path[0][1], path[-1][1]
    meta: dict[str, Any] = {"session_id": sid}
    meta.update({k: first[k] for k in ("cwd", "gitBranch", "version") if k in first})
    meta.update(trace_extras(b, messages, subagents))
    if thread.sidechain:
        meta.update(sidechain=True, parent_session=sid)
        if thread.agent:
            meta["agent_id"] = thread.agent
    suffix = f":agent:{thread.agent}" if thread.agent else f":sidechain:{thread.root}"
    return Trace(
        source="claude_code",
        source_id=sid + (suffix if thread.sidechain else ""),
        source_file=file,
        source_lines=sorted(lines),
        messages=messages,
        model=b.model,
        started_at=first.get("timestamp"),
        ended_at=last.get("timestamp"),
        metadata=meta,
    )


def trace_extras(b: Builder, messages: list[Message], subagents: dict[str, str]) -> dict[str, Any]:
    """Compactions, skipped blocks, subagent links, and the calls left without a result."""
    meta: dict[str, Any] = {}
    if b.compactions:
        meta["compactions"] = b.compactions
    if b.skipped_blocks:
        meta["skipped_blocks"] = dict(b.skipped_blocks)
    if subagents:
        meta["subagents"] = subagents
    answered = {m.tool_call_id for m in messages if m.role == "tool"}
    calls = [c.id for m in messages for c in m.tool_calls or []]
    unanswered = [c for c in calls if c not in answered]
    if unanswered:
        meta["unanswered_calls"] = unanswered
        last = messages[-1]
        meta["unfinished"] = any(c.id in unanswered for c in last.tool_calls or [])
    return meta
