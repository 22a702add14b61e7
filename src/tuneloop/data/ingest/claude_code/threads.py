"""Claude Code transcripts as trees: records sorted by session, threads (the main thread and
each sidechain), and the records a thread is read from (its final path plus the records of its
API messages hanging off it). See the package docstring for the rules."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuneloop.data.ingest.base import Reject, excerpt
from tuneloop.data.ingest.documents import Parsed

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
class Sorted:
    """A file's records sorted: tree records by session, title records, and the rest."""

    sessions: dict[str, list[Entry]] = field(default_factory=dict)
    titles: list[Entry] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)


def sort_records(file: str, entries: Iterable[Entry], parsed: Parsed) -> Sorted:
    """Sort a file's records; tree records go by session, title records apart, skipped records
    without a uuid are counted, the rest rejected."""
    out = Sorted()
    seen: set[str] = set()
    for lineno, obj in entries:
        kind = obj.get("type")
        if not isinstance(kind, str):  # a list or an object is no record type (and unhashable)
            kind = repr(kind)[:40]
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
class Thread:
    """The main thread of a session, or one sidechain, with every tree record of it."""

    entries: list[Entry]
    agent: str | None = None
    root: str | None = None
    """Sidechain only: its agentId (2.x), else the uuid of its root record (1.x)."""

    @property
    def sidechain(self) -> bool:
        return self.agent is not None or self.root is not None


def threads(entries: list[Entry], by_uuid: dict[str, Entry]) -> list[Thread]:
    """A session's main thread and its sidechains: by agentId (2.x), else by root (1.x)."""
    groups: dict[tuple[str, str] | None, Thread] = {}
    for n, obj in entries:
        key: tuple[str, str] | None = None
        if obj.get("isSidechain") and isinstance(obj.get("agentId"), str):
            key = ("agent", obj["agentId"])
        elif obj.get("isSidechain"):
            key = ("root", path_to((n, obj), by_uuid, {})[0][1]["uuid"])
        if key not in groups:
            agent = key[1] if key and key[0] == "agent" else None
            root = key[1] if key and key[0] == "root" else None
            groups[key] = Thread([], agent, root)
        groups[key].entries.append((n, obj))
    return list(groups.values())


def path_to(leaf: Entry, by_uuid: dict[str, Entry], before: dict[int, Entry]) -> list[Entry]:
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


def main_path(thread: Thread, by_uuid: dict[str, Entry]) -> list[Entry]:
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
    path = path_to(turns[-1], by_uuid, before)
    return sorted(path + recover(path, turns), key=lambda e: e[0])


def recover(path: list[Entry], turns: list[Entry]) -> list[Entry]:
    """Off-path records of the path's API messages (same message.id), and off-path
    tool_result records answering their calls, that no path record answers."""
    on_path = {n for n, _ in path}
    ids = {message_id(o) for _, o in path} - {None}
    extra = [(n, o) for n, o in turns if n not in on_path and message_id(o) in ids]
    waiting = {c for _, o in path + extra for c in blocks(o, "tool_use", "id")}
    waiting -= {c for _, o in path for c in blocks(o, "tool_result", "tool_use_id")}
    for n, obj in turns:
        results = blocks(obj, "tool_result", "tool_use_id")
        if n not in on_path and results and set(results) <= waiting:
            extra.append((n, obj))
            waiting -= set(results)
    return extra


def message_id(obj: dict[str, Any]) -> str | None:
    """The API message id of an assistant record (shared by the records of one message)."""
    mid = obj["message"].get("id") if obj.get("type") == "assistant" else None
    return mid if isinstance(mid, str) else None


def blocks(obj: dict[str, Any], kind: str, key: str) -> list[str]:
    """`key` of each `kind` content block of a turn record."""
    content = obj["message"].get("content") if obj.get("type") in TURNS else None
    if not isinstance(content, list):
        return []
    return [str(b.get(key)) for b in content if isinstance(b, dict) and b.get("type") == kind]
