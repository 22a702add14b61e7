"""Ingester `claude_code`: Claude Code session transcripts (`~/.claude/projects/*/*.jsonl`).

Run: `tuneloop ingest --format claude_code ~/.claude/projects/-home-me-proj/*.jsonl --out t.jsonl`.

A transcript is JSONL; conversation entries (`type` user / assistant / system) carry `uuid`
and `parentUuid`, so the file is a tree: editing or rewinding a message starts a new branch.
One trace per session (`sessionId`) is built from its **main thread**: the path from the last
non-sidechain user/assistant entry back to the root, crossing compaction boundaries
(`system` / `compact_boundary`, whose `logicalParentUuid` links to the history before the
compaction) so the whole session stays one conversation. Conversion:
- consecutive assistant entries with the same `message.id` (Claude Code writes one entry per
  content block) merge into one assistant message: `text` → content, `thinking` → reasoning,
  `tool_use` → tool calls (input as JSON arguments); other blocks (`redacted_thinking`,
  server-tool blocks) are left out and counted in `metadata.skipped_blocks`;
- `tool_result` blocks in user entries become `tool` messages, in order, naming the
  `tool_use_id` they answer; other user text stays a user message;
- a compaction summary (`isCompactSummary`) is not a turn anyone typed: it goes to
  `metadata.compactions` with the message index where it applied; a `summary` entry (session
  title) goes to `metadata.title` of the trace holding its `leafUuid`.
Sidechains (`isSidechain`, sub-agent runs) become separate traces
(`<session>:sidechain:<root uuid>`, `metadata.sidechain = true`) by default; option
`sidechains: drop` rejects their lines as `dropped` instead.
Rejected with a counted reason: entries on abandoned branches (`dropped`), synthetic API-error
messages (`dropped`), other `system` entries and record types that are not turns
(`file-history-snapshot`, ... → `unsupported`), and entries without `uuid`/`message`
(`malformed`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tuneloop.data.ingest.base import (
    Converter,
    Lines,
    Reject,
    check_options,
    excerpt,
    line_ingester,
)
from tuneloop.data.ingest.chat import content_text
from tuneloop.data.ingest.detect import sniff_lines
from tuneloop.errors import InputError
from tuneloop.records.trace import Message, ToolCall, Trace

Entry = tuple[int, dict[str, Any]]
TURNS = ("user", "assistant")


def _sort_entries(
    file: str, lines: Lines
) -> tuple[dict[str, list[Entry]], list[Entry], list[Reject]]:
    """Split lines into conversation entries by session, summary entries, and rejects."""
    sessions: dict[str, list[Entry]] = {}
    summaries: list[Entry] = []
    rejects: list[Reject] = []
    seen: set[str] = set()
    for lineno, obj in lines:
        kind = obj.get("type")
        if kind == "summary":
            summaries.append((lineno, obj))
        elif kind not in (*TURNS, "system"):
            rejects.append(
                Reject(
                    file,
                    lineno,
                    f"record type {kind!r} is not a conversation turn",
                    "unsupported",
                    excerpt(obj),
                )
            )
        elif not isinstance(obj.get("uuid"), str):
            rejects.append(Reject(file, lineno, "entry without uuid", excerpt=excerpt(obj)))
        elif kind in TURNS and not isinstance(obj.get("message"), dict):
            rejects.append(
                Reject(file, lineno, "entry without message object", excerpt=excerpt(obj))
            )
        elif obj["uuid"] in seen:
            rejects.append(Reject(file, lineno, "duplicate uuid", "dropped", excerpt(obj)))
        else:
            seen.add(obj["uuid"])
            sid = str(obj.get("sessionId") or Path(file).stem)
            sessions.setdefault(sid, []).append((lineno, obj))
    return sessions, summaries, rejects


def _path_to(leaf: Entry, by_uuid: dict[str, Entry]) -> list[Entry]:
    """Root → leaf path, following parentUuid and, at a compaction boundary, logicalParentUuid."""
    path: list[Entry] = []
    seen: set[str] = set()
    node: Entry | None = leaf
    while node is not None and node[1]["uuid"] not in seen:
        seen.add(node[1]["uuid"])
        path.append(node)
        obj = node[1]
        parent = obj.get("parentUuid") or obj.get("logicalParentUuid")
        node = by_uuid.get(parent) if isinstance(parent, str) else None
    return path[::-1]


def _threads(entries: list[Entry]) -> list[tuple[Entry | None, list[Entry], list[Entry]]]:
    """(sidechain root or None, path, group entries) for the main thread and each sidechain."""
    by_uuid = {obj["uuid"]: (n, obj) for n, obj in entries}
    groups: dict[str | None, list[Entry]] = {}
    for n, obj in entries:
        root = None
        if obj.get("isSidechain"):
            path = _path_to((n, obj), by_uuid)
            root = path[0][1]["uuid"]
        groups.setdefault(root, []).append((n, obj))
    out: list[tuple[Entry | None, list[Entry], list[Entry]]] = []
    for root, group in groups.items():
        turns = [e for e in group if e[1].get("type") in TURNS]
        path = _path_to(turns[-1], by_uuid) if turns else []
        out.append((by_uuid[root] if root else None, path, group))
    return out


def _tool_result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    text = (
        content_text(content)
        if isinstance(content, (str, list)) or content is None
        else json.dumps(content)
    )
    return text or ""


class _Builder:
    """Accumulates messages from a thread's entries, merging split assistant messages."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.lines: list[int] = []
        self.compactions: list[dict[str, Any]] = []
        self._last_assistant_id: str | None = None
        self.model: str | None = None
        self.skipped_blocks: dict[str, int] = {}
        """Assistant content blocks of kinds not converted (redacted_thinking, server tools)."""

    def add_user(self, lineno: int, obj: dict[str, Any]) -> None:
        self._last_assistant_id = None
        content = obj["message"].get("content")
        if obj.get("isCompactSummary"):
            self.compactions.append(
                {"at_message": len(self.messages), "summary": content_text(content) or ""}
            )
            return
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
        text: list[str] = []
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                self._flush_user(text)
                self.messages.append(
                    Message(
                        role="tool",
                        content=_tool_result_text(block),
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

    def add_assistant(self, lineno: int, obj: dict[str, Any]) -> None:
        msg = obj["message"]
        mid = msg.get("id")
        if (
            not self.messages
            or mid is None
            or mid != self._last_assistant_id
            or self.messages[-1].role != "assistant"
        ):
            self.messages.append(Message(role="assistant", content=None))
        self._last_assistant_id = mid
        if isinstance(msg.get("model"), str) and msg["model"] != "<synthetic>":
            self.model = msg["model"]
        target = self.messages[-1]
        content = msg.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
        for block in blocks:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text":
                target.content = _join(target.content, block.get("text") or "")
            elif kind == "thinking":
                target.reasoning = _join(target.reasoning, block.get("thinking") or "")
            elif kind == "tool_use":
                args = json.dumps(block.get("input") or {}, ensure_ascii=False)
                call = ToolCall(
                    id=str(block.get("id")), name=str(block.get("name")), arguments=args
                )
                target.tool_calls = [*(target.tool_calls or []), call]
            else:
                name = str(kind)
                self.skipped_blocks[name] = self.skipped_blocks.get(name, 0) + 1


def _join(a: str | None, b: str) -> str:
    return b if not a else f"{a}\n{b}"


def _build(
    file: str, sid: str, root: Entry | None, path: list[Entry]
) -> tuple[Trace | None, list[Reject]]:
    b = _Builder()
    rejects: list[Reject] = []
    for lineno, obj in path:
        kind = obj["type"]
        if kind == "system":
            if obj.get("subtype") == "compact_boundary":
                b.lines.append(lineno)
            else:
                rejects.append(
                    Reject(
                        file,
                        lineno,
                        f"system entry ({obj.get('subtype', 'no subtype')}) "
                        "is not a conversation turn",
                        "unsupported",
                        excerpt(obj),
                    )
                )
            continue
        if kind == "assistant" and obj.get("isApiErrorMessage"):
            rejects.append(
                Reject(
                    file,
                    lineno,
                    "synthetic API-error message (not model output)",
                    "dropped",
                    excerpt(obj),
                )
            )
            continue
        (b.add_user if kind == "user" else b.add_assistant)(lineno, obj)
        b.lines.append(lineno)
    if not b.messages:
        rejects.extend(
            Reject(file, n, "thread has no conversation turns", "dropped") for n in b.lines
        )
        return None, rejects
    first, last = path[0][1], path[-1][1]
    meta: dict[str, Any] = {k: first[k] for k in ("cwd", "gitBranch", "version") if k in first}
    if b.compactions:
        meta["compactions"] = b.compactions
    if b.skipped_blocks:
        meta["skipped_blocks"] = b.skipped_blocks
    if root is not None:
        meta["sidechain"] = True
    trace = Trace(
        source="claude_code",
        source_id=sid if root is None else f"{sid}:sidechain:{root[1]['uuid']}",
        source_file=file,
        source_lines=sorted(b.lines),
        messages=b.messages,
        model=b.model,
        started_at=first.get("timestamp"),
        ended_at=last.get("timestamp"),
        metadata=meta,
    )
    return trace, rejects


def looks_like_claude_code(path: Path) -> bool:
    """A JSONL file of Claude Code transcript records (session ids, typed records)."""
    lines = sniff_lines(path)
    kinds = {"user", "assistant", "system", "summary", "file-history-snapshot"}
    return (
        bool(lines)
        and all(o.get("type") in kinds for o in lines)
        and any("sessionId" in o for o in lines)
    )


@line_ingester("claude_code", detect=looks_like_claude_code)
def claude_code(**options: Any) -> Converter:
    """Claude Code session transcripts: one trace per session's main thread (+ sidechains)."""
    check_options("claude_code", options, {"sidechains"})
    mode = options.get("sidechains", "separate")
    if mode not in ("separate", "drop"):
        raise InputError("ingester 'claude_code': option sidechains must be 'separate' or 'drop'")

    def convert(file: str, lines: Lines) -> Iterator[Trace | Reject]:
        sessions, summaries, rejects = _sort_entries(file, lines)
        yield from rejects
        traces: list[Trace] = []
        leaf_owner: dict[str, Trace] = {}
        for sid, entries in sessions.items():
            for root, path, group in _threads(entries):
                on_path = {n for n, _ in path}
                for n, obj in group:
                    if n not in on_path:
                        yield Reject(
                            file,
                            n,
                            "abandoned branch (not on the thread's final path)",
                            "dropped",
                            excerpt(obj),
                        )
                if root is not None and mode == "drop":
                    yield from (
                        Reject(file, n, "sidechain dropped (option sidechains: drop)", "dropped")
                        for n in sorted(on_path)
                    )
                    continue
                trace, bad = _build(file, sid, root, path)
                yield from bad
                if trace is not None:
                    traces.append(trace)
                    leaf_owner.update({obj["uuid"]: trace for _, obj in path})
        for lineno, obj in summaries:
            owner = leaf_owner.get(str(obj.get("leafUuid")))
            if owner is None:
                yield Reject(
                    file,
                    lineno,
                    "summary of a conversation not in this file",
                    "unsupported",
                    excerpt(obj),
                )
            else:
                owner.metadata.setdefault("title", obj.get("summary"))
                owner.source_lines.append(lineno)
        for trace in traces:
            trace.source_lines.sort()
        yield from traces

    return convert
