"""Ingester `claude_code`: Claude Code session transcripts (`~/.claude/projects/<project>/`).

Run: `tuneloop ingest --format claude_code ~/.claude/projects/-home-me-proj/*.jsonl --out t.jsonl`
(subagent transcripts too: `<session>/subagents/agent-*.jsonl`), or `--format auto` on the
project folder, which walks it.

A transcript is JSONL read whole (a document ingester: records are the file's non-blank lines,
numbered by line). Conversation records (`user`, `assistant`, and the `system`, `progress` and
`attachment` records between them) carry `uuid` and `parentUuid`, so a file is a tree: editing
or rewinding a message starts a new branch. One trace per session (`sessionId`) is built from
its **main thread**: the path from the last non-sidechain user/assistant record back to the
root, crossing compaction boundaries (`system`/`compact_boundary`, whose `logicalParentUuid`
links to the history before the compaction; when that record is not in the file — Claude Code
2.1 writes such boundaries — the boundary continues from the last turn before it).

Claude Code writes one record per content block of an API message (thinking, text, each
tool_use), chained one after the other, and starts running a tool as soon as its block ends, so
the chain forks: parallel calls hang off their own blocks, and a result can sit between two
blocks of one message. The thread therefore also takes in (`threads.py`'s rule, here
`_recover`) every record of an API message on the path (same `message.id`) and every
tool_result record answering a call of those messages; records are then read in file order:
- records of one API message merge into one assistant message — `text` → content, `thinking` →
  reasoning (option `reasoning: drop` leaves it out), `tool_use` → tool calls — even when tool
  results were written between them: the results follow the merged message, in call order;
  other blocks (`redacted_thinking`, server-tool blocks) are counted in
  `metadata.skipped_blocks`, and a record holding nothing but hidden reasoning (a
  `redacted_thinking` block, or a `thinking` block whose text is empty: signature only) is
  skipped as `encrypted reasoning` (`reasoning dropped` under `reasoning: drop`);
- `tool_result` blocks become `tool` messages naming the `tool_use_id` they answer; other user
  text stays a user message; a compaction summary (`isCompactSummary`) goes to
  `metadata.compactions` with the message index where it applied;
- a call with no result (a session stopped mid-tool) stays in its message: its id is listed in
  `metadata.unanswered_calls`, and `metadata.unfinished` is true when the trace ends on it.

Subagents. A sidechain (`isSidechain`, a `Task` subagent run) is a trace of its own:
`<session>:agent:<agentId>` (a subagent file, `agent-<id>.jsonl`, holds one; Claude Code 2.x),
or `<session>:sidechain:<root uuid>` for the sidechain records of a 1.x session file;
`metadata.sidechain` is true and `metadata.parent_session` names the session. The parent
trace's `metadata.subagents` maps each `Task` call id to its subagent trace id (from the
result's `toolUseResult.agentId`), so a subagent file ingests on its own and joins its parent
by id, in any order. Option `sidechains: drop` rejects sidechain records as `dropped`.

Skipped, by kind: `snapshot` (file-history-snapshot), `progress` (hook, bash and agent progress:
the agent's messages are in its own file), `queue operation`, `system entry` (turn durations,
hook summaries, local command output), `attachment`, `ui state` (mode, permission-mode,
last-prompt, tag, pr-link, worktree-state), `summary (other session)` (a `summary` whose leaf is
not in the file: Claude Code writes the titles of earlier sessions at the top of a resumed one),
`encrypted reasoning`. A `summary`, `custom-title` or `ai-title` of a session in the file is
merged into its trace as `metadata.title`. Rejected: records on abandoned branches and synthetic
API-error messages (`dropped`), records without `uuid`/`message` (`malformed`), record types not
known here (`unsupported`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuneloop.data.ingest.base import Reject, check_options, excerpt, line_census, read_json_lines
from tuneloop.data.ingest.chat import content_text
from tuneloop.data.ingest.detect import sniff_lines
from tuneloop.data.ingest.documents import Parsed, document_ingester
from tuneloop.errors import InputError
from tuneloop.plugins import DocumentConverter
from tuneloop.records.trace import Message, ToolCall, Trace

Entry = tuple[int, dict[str, Any]]
TURNS = ("user", "assistant")
SKIPPED = {
    "file-history-snapshot": "snapshot",
    "progress": "progress",
    "queue-operation": "queue operation",
    "system": "system entry",
    "attachment": "attachment",
    **dict.fromkeys(
        ("mode", "permission-mode", "last-prompt", "tag", "pr-link", "worktree-state"), "ui state"
    ),
}
"""Record types read and deliberately not turned into messages, with the kind they count as."""
TITLES = {"summary": "summary", "custom-title": "customTitle", "ai-title": "aiTitle"}
"""Title records and the field holding the title."""
KNOWN = {*TURNS, *SKIPPED, *TITLES}


@dataclass
class _Sorted:
    """A file's records sorted: tree records by session, title records, and the rest."""

    sessions: dict[str, list[Entry]] = field(default_factory=dict)
    titles: list[Entry] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)


def _sort(file: str, entries: Iterable[Entry], parsed: Parsed) -> _Sorted:
    out = _Sorted()
    seen: set[str] = set()
    for lineno, obj in entries:
        kind = obj.get("type")
        if kind in TITLES:
            out.titles.append((lineno, obj))
        elif kind not in KNOWN:
            reason = f"record type {kind!r} is not a conversation turn"
            out.rejects.append(Reject(file, lineno, reason, "unsupported", excerpt(obj)))
        elif not isinstance(obj.get("uuid"), str):
            if kind in SKIPPED:
                parsed.skip(SKIPPED[kind])
            else:
                out.rejects.append(Reject(file, lineno, "entry without uuid", excerpt=excerpt(obj)))
        elif kind in TURNS and not isinstance(obj.get("message"), dict):
            reason = "entry without message object"
            out.rejects.append(Reject(file, lineno, reason, excerpt=excerpt(obj)))
        elif obj["uuid"] in seen:
            out.rejects.append(Reject(file, lineno, "duplicate uuid", "dropped", excerpt(obj)))
        else:
            seen.add(obj["uuid"])
            sid = str(obj.get("sessionId") or Path(file).stem)
            out.sessions.setdefault(sid, []).append((lineno, obj))
    return out


@dataclass
class _Thread:
    """The main thread of a session, or one sidechain, with every tree record of it."""

    entries: list[Entry]
    agent: str | None = None
    root: str | None = None
    """Sidechain only: its agentId (2.x), else the uuid of its root record (1.x)."""

    @property
    def sidechain(self) -> bool:
        return self.agent is not None or self.root is not None


def _threads(entries: list[Entry], by_uuid: dict[str, Entry]) -> list[_Thread]:
    groups: dict[tuple[str, str] | None, _Thread] = {}
    for n, obj in entries:
        key: tuple[str, str] | None = None
        if obj.get("isSidechain") and isinstance(obj.get("agentId"), str):
            key = ("agent", obj["agentId"])
        elif obj.get("isSidechain"):
            key = ("root", _path_to((n, obj), by_uuid, {})[0][1]["uuid"])
        if key not in groups:
            agent = key[1] if key and key[0] == "agent" else None
            root = key[1] if key and key[0] == "root" else None
            groups[key] = _Thread([], agent, root)
        groups[key].entries.append((n, obj))
    return list(groups.values())


def _path_to(leaf: Entry, by_uuid: dict[str, Entry], before: dict[int, Entry]) -> list[Entry]:
    """Root → leaf path, following parentUuid and, at a compaction boundary, logicalParentUuid
    (or, when that record is missing, `before[boundary line]`: the last turn before it)."""
    path: list[Entry] = []
    seen: set[str] = set()
    node: Entry | None = leaf
    while node is not None and node[1]["uuid"] not in seen:
        seen.add(node[1]["uuid"])
        path.append(node)
        obj = node[1]
        parent = obj.get("parentUuid") or obj.get("logicalParentUuid")
        node = by_uuid.get(parent) if isinstance(parent, str) else None
        if node is None and obj.get("subtype") == "compact_boundary":
            node = before.get(path[-1][0])
    return path[::-1]


def _main_path(thread: _Thread, by_uuid: dict[str, Entry]) -> list[Entry]:
    """The thread's final path plus the records of its API messages that hang off it."""
    turns = [e for e in thread.entries if e[1].get("type") in TURNS]
    if not turns:
        return []
    before: dict[int, Entry] = {}
    last: Entry | None = None
    for n, obj in thread.entries:
        if obj.get("subtype") == "compact_boundary" and last is not None:
            before[n] = last
        if obj.get("type") in TURNS:
            last = (n, obj)
    path = _path_to(turns[-1], by_uuid, before)
    return sorted(path + _recover(path, turns), key=lambda e: e[0])


def _recover(path: list[Entry], turns: list[Entry]) -> list[Entry]:
    """Off-path records of the path's API messages (same message.id), and off-path
    tool_result records answering their calls, that no path record answers."""
    on_path = {n for n, _ in path}
    ids = {_message_id(o) for _, o in path} - {None}
    extra = [(n, o) for n, o in turns if n not in on_path and _message_id(o) in ids]
    calls = {c for _, o in path + extra for c in _blocks(o, "tool_use", "id")}
    answered = {c for _, o in path for c in _blocks(o, "tool_result", "tool_use_id")}
    for n, obj in turns:
        results = _blocks(obj, "tool_result", "tool_use_id")
        if n not in on_path and results and set(results) <= calls - answered:
            extra.append((n, obj))
            answered.update(results)
    return extra


def _message_id(obj: dict[str, Any]) -> str | None:
    mid = obj["message"].get("id") if obj.get("type") == "assistant" else None
    return mid if isinstance(mid, str) else None


def _blocks(obj: dict[str, Any], kind: str, key: str) -> list[str]:
    """`key` of each `kind` content block of a turn record."""
    content = obj["message"].get("content") if obj.get("type") in TURNS else None
    if not isinstance(content, list):
        return []
    return [str(b.get(key)) for b in content if isinstance(b, dict) and b.get("type") == kind]


def _tool_result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    text = (
        content_text(content)
        if isinstance(content, (str, list)) or content is None
        else json.dumps(content)
    )
    return text or ""


class _Builder:
    """Accumulates messages from a thread's turn records, merging split assistant messages."""

    def __init__(self, keep_reasoning: bool) -> None:
        self.keep_reasoning = keep_reasoning
        self.messages: list[Message] = []
        self.compactions: list[dict[str, Any]] = []
        self.model: str | None = None
        self.skipped_blocks: Counter[str] = Counter()
        """Assistant content blocks of kinds not converted (redacted_thinking, server tools)."""
        self._open: tuple[str, int] | None = None  # (message.id, index) of the last assistant

    def add_user(self, obj: dict[str, Any]) -> None:
        content = obj["message"].get("content")
        if obj.get("isCompactSummary"):
            summary = content_text(content) or ""
            self.compactions.append({"at_message": len(self.messages), "summary": summary})
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

    def add_assistant(self, obj: dict[str, Any]) -> str | None:
        """Merge one assistant record; the skip kind when it added nothing, else None."""
        msg = obj["message"]
        if isinstance(msg.get("model"), str) and msg["model"] != "<synthetic>":
            self.model = msg["model"]
        content = msg.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
        parts: list[tuple[str, Any]] = []
        hidden = dropped = 0
        for block in blocks:
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
        self._merge(_message_id(obj), parts)
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
                target.content = _join(target.content, value)
            elif kind == "reasoning":
                target.reasoning = _join(target.reasoning, value)
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


def _join(a: str | None, b: str) -> str:
    return b if not a else f"{a}\n{b}"


def _build(
    file: str, sid: str, thread: _Thread, path: list[Entry], keep_reasoning: bool, parsed: Parsed
) -> Trace | None:
    """The thread's trace; rejects and skips of its records go to `parsed`."""
    b = _Builder(keep_reasoning)
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
            for call in _blocks(obj, "tool_result", "tool_use_id"):
                subagents[call] = f"{sid}:agent:{agent['agentId']}"
    messages = b.finish()
    if not messages:
        parsed.rejects.extend(
            Reject(file, n, "thread has no conversation turns", "dropped") for n in lines
        )
        return None
    first, last = path[0][1], path[-1][1]
    meta: dict[str, Any] = {k: first[k] for k in ("cwd", "gitBranch", "version") if k in first}
    meta.update(_extras(b, messages, subagents))
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


def _extras(b: _Builder, messages: list[Message], subagents: dict[str, str]) -> dict[str, Any]:
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


def looks_like_claude_code(path: Path) -> bool:
    """A JSONL file of Claude Code transcript records (typed records, session ids)."""
    lines = sniff_lines(path)
    return (
        bool(lines)
        and all(isinstance(o.get("type"), str) for o in lines)
        and any(o["type"] in KNOWN for o in lines)
        and any("sessionId" in o for o in lines)
    )


@document_ingester("claude_code", detect=looks_like_claude_code)
def claude_code(**options: Any) -> DocumentConverter:
    """Claude Code session transcripts: one trace per session's main thread (+ sidechains)."""
    check_options("claude_code", options, {"sidechains", "reasoning"})
    sidechains = options.get("sidechains", "separate")
    if sidechains not in ("separate", "drop"):
        raise InputError("ingester 'claude_code': option sidechains must be 'separate' or 'drop'")
    if options.get("reasoning", "keep") not in ("keep", "drop"):
        raise InputError("ingester 'claude_code': option reasoning must be 'keep' or 'drop'")
    keep_reasoning = options.get("reasoning", "keep") == "keep"

    def convert(source: Path) -> Parsed:
        if source.is_dir():
            raise InputError(
                f"{source}: a folder; give its session files ({source}/*.jsonl, and "
                f"{source}/*/subagents/*.jsonl for subagents), or --format auto {source}"
            )
        parsed = Parsed(records=len(line_census(source)[0]))
        file = str(source)
        rejects: list[Reject] = []
        entries = list(read_json_lines(source, rejects))
        sorted_ = _sort(file, entries, parsed)
        parsed.rejects += rejects + sorted_.rejects
        owners: dict[str, Trace] = {}  # record uuid -> the trace of its thread
        for sid, group in sorted_.sessions.items():
            by_uuid = {obj["uuid"]: (n, obj) for n, obj in group}
            for thread in _threads(group, by_uuid):
                trace = _thread(file, sid, thread, by_uuid, sidechains, keep_reasoning, parsed)
                if trace is not None:
                    parsed.traces.append(trace)
                    owners.update({obj["uuid"]: trace for _, obj in thread.entries})
        _titles(sorted_.titles, owners, parsed)
        return parsed

    return convert


def _thread(
    file: str,
    sid: str,
    thread: _Thread,
    by_uuid: dict[str, Entry],
    sidechains: str,
    keep_reasoning: bool,
    parsed: Parsed,
) -> Trace | None:
    path = _main_path(thread, by_uuid)
    on_path = {n for n, _ in path}
    for n, obj in thread.entries:
        if n in on_path:
            continue
        if obj["type"] in TURNS:
            reason = "abandoned branch (not on the thread's final path)"
            parsed.rejects.append(Reject(file, n, reason, "dropped", excerpt(obj)))
        else:
            parsed.skip(SKIPPED[obj["type"]])
    if thread.sidechain and sidechains == "drop":
        reason = "sidechain dropped (option sidechains: drop)"
        parsed.rejects.extend(Reject(file, n, reason, "dropped") for n in sorted(on_path))
        return None
    return _build(file, sid, thread, path, keep_reasoning, parsed) if path else None


def _titles(titles: list[Entry], owners: dict[str, Trace], parsed: Parsed) -> None:
    """Title records into `metadata.title` of the trace they name, else skipped: a summary
    names its session's last record (`leafUuid`), a custom or AI title its `sessionId`."""
    main = {t.source_id: t for t in parsed.traces if not t.metadata.get("sidechain")}
    for lineno, obj in titles:
        kind = obj["type"]
        if kind == "summary":
            owner = owners.get(str(obj.get("leafUuid")))
        else:
            owner = main.get(str(obj.get("sessionId")))
        title = obj.get(TITLES[kind])
        if owner is None or not isinstance(title, str):
            parsed.skip("summary (other session)" if kind == "summary" else "title")
            continue
        if kind == "summary":
            owner.metadata.setdefault("title", title)
        else:  # a title the user set, or Claude Code's latest, wins over a summary
            owner.metadata["title"] = title
        owner.source_lines = sorted([*owner.source_lines, lineno])
