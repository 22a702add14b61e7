"""Ingester `claude_code`: Claude Code session transcripts (`~/.claude/projects/<project>/`).

Run: `tuneloop ingest --format claude_code ~/.claude/projects/-home-me-proj/ --out t.jsonl` (the
session files and, under `<session>/subagents/`, their subagents' `agent-*.jsonl`).

A transcript is JSONL read whole — a document ingester, so that records read and not turned
into messages are counted by kind rather than rejected; its records are the file's non-blank
lines, numbered by line. One source is one file: a folder given to `tuneloop ingest` stands for
the transcripts under it (`sources.py`), and the converter itself refuses a folder.

Conversation records (`user`, `assistant`, and the `system`, `progress` and `attachment` records
between them) carry `uuid` and `parentUuid`, so a file is a tree: editing or rewinding a message
starts a new branch. One trace per session (`sessionId`) is built from
its **main thread**: the path from the last non-sidechain user/assistant record back to the
root, crossing compaction boundaries (`system`/`compact_boundary`, whose `logicalParentUuid`
links to the history before the compaction; when that record is not in the file — Claude Code
2.1 writes such boundaries — the boundary continues from the last turn before it).

Claude Code writes one record per content block of an API message (thinking, text, each
tool_use), chained one after the other, and starts running a tool as soon as its block ends, so
the chain forks: parallel calls hang off their own blocks, and a result can sit between two
blocks of one message. The thread therefore also takes in (`threads.recover`) every record of
an API message on the path (same `message.id`) and every tool_result record answering a call of
those messages that no path record answers; records are then read in file order
(`messages.py`):
- records of one API message merge into one assistant message — `text` → content, `thinking` →
  reasoning (option `reasoning: drop` leaves it out), `tool_use` → tool calls — even when tool
  results were written between them: the results follow the merged message, in call order;
  other blocks (server-tool blocks, images) are counted in `metadata.skipped_blocks`; hidden
  reasoning (a `redacted_thinking` block, or a `thinking` block whose text is empty: signature
  only) is never kept as text — a record holding nothing else is skipped as `encrypted
  reasoning` (`reasoning dropped` for visible thinking under `reasoning: drop`), beside other
  blocks it is counted in `metadata.skipped_blocks` as `encrypted reasoning`;
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

from pathlib import Path
from typing import Any

from tuneloop.data.ingest.base import Reject, check_options, excerpt, line_census, read_json_lines
from tuneloop.data.ingest.claude_code.messages import build_trace
from tuneloop.data.ingest.claude_code.threads import (
    KNOWN,
    SKIPPED,
    TITLES,
    TURNS,
    Entry,
    Thread,
    main_path,
    sort_records,
    threads,
)
from tuneloop.data.ingest.detect import sniff_lines
from tuneloop.data.ingest.documents import Parsed, document_ingester
from tuneloop.errors import InputError
from tuneloop.plugins import DocumentConverter
from tuneloop.records.trace import Trace

__all__ = ["claude_code", "looks_like_claude_code"]


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
        sorted_ = sort_records(file, entries, parsed)
        parsed.rejects += rejects + sorted_.rejects
        owners: dict[str, Trace] = {}  # record uuid -> the trace of its thread
        for sid, group in sorted_.sessions.items():
            by_uuid = {obj["uuid"]: (n, obj) for n, obj in group}
            for thread in threads(group, by_uuid):
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
    thread: Thread,
    by_uuid: dict[str, Entry],
    sidechains: str,
    keep_reasoning: bool,
    parsed: Parsed,
) -> Trace | None:
    path = main_path(thread, by_uuid)
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
    return build_trace(file, sid, thread, path, keep_reasoning, parsed) if path else None


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
