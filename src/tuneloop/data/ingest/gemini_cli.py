"""Ingester `gemini_cli`: Google Gemini CLI chat sessions and `/chat save` checkpoints.

Run: `tuneloop ingest --format gemini_cli ~/.gemini/tmp/<hash>/chats/session-*.json* --out t.jsonl`
(or `--format auto ~/.gemini/tmp`, which walks the project folders).

Three shapes, told apart by looking (one trace per file, `source_id` and `metadata.session_id`
the session id — a checkpoint's is its file name):
- `session-*.json` (Gemini CLI until early 2026): one object `{sessionId, projectHash,
  startTime, lastUpdated, messages: [...]}`. Records are the messages, numbered from 1.
- `session-*.jsonl` (since): an append log, records are its non-blank lines, numbered by
  line: a metadata line; message records (a message is appended again, whole, each time it
  changes — its last version wins, the earlier ones are skipped as `superseded update`);
  `{"$set": {...}}` metadata updates (skipped as `metadata update`; one carrying `messages`
  replaces the conversation, as the CLI's loader does); `{"$rewindTo": id}` (the user rewound:
  that message and every later one are removed — `dropped` rejects naming the rewind — and
  the marker is skipped as `rewind marker`).
- `checkpoint-<tag>.json` (`/chat save`): the raw API history, `[Content]` or
  `{"history": [Content]}`, Content = `{role: user|model, parts}`. Records are the Contents.
A session message of type `user` becomes a user message; `gemini` an assistant message whose
content is its text, with its `toolCalls` as tool calls (`args` as JSON arguments) followed by
one tool message per call holding its `result` (a `functionResponse`'s `output` or `error`,
else the response as JSON; `status` error/cancelled marks it `is_error`), paired by the
call's `id`. Deliberately the text stays on the assistant message that made the calls, before
the results: the CLI records a model response's text and then attaches that same response's
calls to it, so the model wrote the text before it saw any result. A user message that only
repeats tool results already given (newer CLIs record them as a user turn too) is skipped as
`duplicate tool result`; a `functionResponse` without a known id answers the oldest open call
of the same name (checkpoints of older CLIs carry no ids). `thoughts` (`{subject,
description}`) become reasoning `**subject**\\n\\ndescription` (option `reasoning:
keep|drop`); `tokens` are summed into `metadata.tokens`, never messages; `info`, `warning`
and `error` messages are the CLI's notices, not turns: skipped as `info message` etc.
One source is one file: given a folder, `tuneloop ingest` reads the session files under it
(`sources.py`); the converter itself refuses a folder.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from tuneloop.data.ingest.base import (
    Reject,
    check_options,
    excerpt,
    line_census,
    read_json_lines,
)
from tuneloop.data.ingest.detect import sniff_lines, sniff_text
from tuneloop.data.ingest.documents import Parsed, document_ingester, load_json_document
from tuneloop.errors import InputError
from tuneloop.plugins import DocumentConverter
from tuneloop.records.trace import Message, ToolCall, Trace

NOTICES = ("info", "warning", "error")
TOKEN_KEYS = ("input", "output", "cached", "thoughts", "tool", "total")
HEADER_KEYS = {"format": "format", "projectHash": "project_hash", "kind": "kind"}
HEADER_KEYS |= {"summary": "summary", "directories": "directories"}
"""Header fields kept in metadata, by the name they get there."""
_CHECKPOINT = re.compile(r'^\s*(\[|\{\s*"history")')

Record = tuple[int, dict[str, Any]]


def _parts(content: Any) -> list[Any]:
    if content is None:
        return []
    return content if isinstance(content, list) else [content]


def _part_text(part: Any) -> str | None:
    """Text of a non-call part: its text, or a placeholder for media."""
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return None
    if isinstance(part.get("text"), str):
        return part["text"]
    for key in ("inlineData", "fileData"):
        if isinstance(part.get(key), dict):
            image = str(part[key].get("mimeType", "")).startswith("image/")
            return "[image]" if image else "[file]"
    return None


def _placeholder(part: Any) -> str:
    """`[inlineData]`-style stand-in for a part that has no text (its first key)."""
    return f"[{next(iter(part), 'part')}]" if isinstance(part, dict) else json.dumps(part)


def result_text(result: Any) -> str:
    """A tool result (`functionResponse` parts, text parts, a string) as text."""
    out = []
    for part in _parts(result):
        response = part.get("functionResponse") if isinstance(part, dict) else None
        if isinstance(response, dict):
            body = response.get("response")
            if isinstance(body, dict) and isinstance(body.get("output"), str):
                out.append(body["output"])
            elif isinstance(body, dict) and "error" in body:
                out.append(str(body["error"]))
            else:
                out.append(json.dumps(body, ensure_ascii=False))
        elif (text := _part_text(part)) is not None:
            out.append(text)
    return "\n".join(out)


def _thoughts(thoughts: Any) -> str | None:
    out = []
    for t in thoughts if isinstance(thoughts, list) else []:
        if isinstance(t, dict):
            subject, text = t.get("subject") or "", t.get("description") or ""
            out.append(f"**{subject}**\n\n{text}" if subject else str(text))
    return "\n\n".join(out) or None


class _Chat:
    """Messages built from a session's final message records; the fate of every record."""

    def __init__(self, file: str, keep_reasoning: bool) -> None:
        self.file, self.keep_reasoning = file, keep_reasoning
        self.messages: list[Message] = []
        self.merged: set[int] = set()
        self.kinds: dict[int, str] = {}
        self.bad: dict[int, Reject] = {}
        self.open: dict[str, str] = {}  # unanswered call id -> tool name
        self.answered: set[str] = set()
        self.tokens: Counter[str] = Counter()
        self.models: list[str] = []

    def add(self, n: int, msg: dict[str, Any]) -> None:
        kind = msg.get("type")
        if kind == "user":
            self.user(n, msg)
        elif kind == "gemini":
            self.gemini(n, msg)
        elif kind in NOTICES:
            self.kinds[n] = f"{kind} message"
        else:
            why = f"message type {kind!r} is not user, gemini, info, warning or error"
            self.bad[n] = Reject(self.file, n, why, "unsupported", excerpt(msg))

    def emit(self, n: int, message: Message) -> None:
        self.messages.append(message)
        self.merged.add(n)

    def answer(self, n: int, call_id: str, text: str, failed: bool | None) -> None:
        name = self.open.pop(call_id)
        self.answered.add(call_id)
        self.emit(
            n, Message(role="tool", content=text, tool_call_id=call_id, name=name, is_error=failed)
        )

    def user(self, n: int, msg: dict[str, Any]) -> None:
        texts, repeats, orphans = [], 0, 0
        for part in _parts(msg.get("content")):
            response = part.get("functionResponse") if isinstance(part, dict) else None
            if not isinstance(response, dict):
                texts.append(t if (t := _part_text(part)) is not None else _placeholder(part))
                continue
            call_id = self._call_for(response)
            if call_id is not None:
                self.answer(n, call_id, result_text([part]), None)
            elif response.get("id") in self.answered:
                repeats += 1
            else:
                orphans += 1
        if texts:
            self.emit(n, Message(role="user", content="\n".join(texts)))
        elif n in self.merged:
            pass
        elif orphans:
            reason = f"{orphans} tool result(s) for calls no gemini message made"
            self.bad[n] = Reject(self.file, n, reason, "malformed", excerpt(msg))
        else:
            self.kinds[n] = "duplicate tool result" if repeats else "empty message"

    def _call_for(self, response: dict[str, Any]) -> str | None:
        """The open call a functionResponse answers: by id, else the oldest of its name."""
        if response.get("id") in self.open:
            return str(response["id"])
        if response.get("id") in self.answered:
            return None
        return next((c for c, name in self.open.items() if name == response.get("name")), None)

    def gemini(self, n: int, msg: dict[str, Any]) -> None:
        tokens = msg.get("tokens")
        if isinstance(tokens, dict):
            self.tokens.update({k: v for k, v in tokens.items() if isinstance(v, int)})
        model = msg.get("model")
        if isinstance(model, str) and (not self.models or self.models[-1] != model):
            self.models.append(model)
        parts = [p for p in _parts(msg.get("content")) if not _is_call(p)]
        text = "".join(t for p in parts if not _is_thought(p) and (t := _part_text(p)))
        thought = [str(p["text"]) for p in parts if _is_thought(p)]
        reasoning = _thoughts(msg.get("thoughts")) or "\n\n".join(thought) or None
        calls = [c for c in msg.get("toolCalls") or [] if isinstance(c, dict)]
        if reasoning and not self.keep_reasoning:
            reasoning = None
            if not text and not calls:
                self.kinds[n] = "reasoning (option reasoning: drop)"
                return
        if not (text or calls or reasoning):
            self.kinds[n] = "empty reply"
            return
        tool_calls = [
            ToolCall(
                id=str(c.get("id") or f"{msg.get('id', n)}#{i}"),
                name=str(c.get("name")),
                arguments=json.dumps(c.get("args") or {}, ensure_ascii=False),
            )
            for i, c in enumerate(calls)
        ]
        self.emit(n, Message(role="assistant", content=text or None, reasoning=reasoning))
        self.messages[-1].tool_calls = tool_calls or None
        for call, record in zip(tool_calls, calls, strict=True):
            self.open[call.id] = call.name
            self._result(n, call.id, record)

    def _result(self, n: int, call_id: str, record: dict[str, Any]) -> None:
        status, result = record.get("status"), record.get("result")
        failed = status in ("error", "cancelled") or None
        if result:
            self.answer(n, call_id, result_text(result), failed)
        elif failed:
            shown = record.get("resultDisplay")
            self.answer(n, call_id, shown if isinstance(shown, str) else f"[{status}]", True)

    def trace(self, sid: str, header: dict[str, Any]) -> Trace | None:
        if not self.messages:
            return None
        meta: dict[str, Any] = {"session_id": sid}
        meta.update(
            {to: header[k] for k, to in HEADER_KEYS.items() if header.get(k) not in (None, "", [])}
        )
        if self.tokens:
            meta["tokens"] = {k: self.tokens[k] for k in TOKEN_KEYS if k in self.tokens}
        if len(self.models) > 1:
            meta["models"] = self.models
        if self.open:
            meta["unanswered_calls"] = list(self.open)
        return Trace(
            source="gemini_cli",
            source_id=sid,
            source_file=self.file,
            source_lines=sorted(self.merged),
            messages=self.messages,
            model=self.models[-1] if self.models else None,
            started_at=header.get("startTime"),
            ended_at=header.get("lastUpdated"),
            metadata=meta,
        )


def _is_call(part: Any) -> bool:
    return isinstance(part, dict) and ("functionCall" in part or "functionResponse" in part)


def _is_thought(part: Any) -> bool:
    return (
        isinstance(part, dict) and part.get("thought") is True and isinstance(part.get("text"), str)
    )


def _is_header(obj: dict[str, Any]) -> bool:
    """The CLI's test for a metadata record: a session id and a project hash."""
    return isinstance(obj.get("sessionId"), str) and isinstance(obj.get("projectHash"), str)


def _replay(
    file: str, lines: list[Record], parsed: Parsed
) -> tuple[dict[str, Any], list[Record], set[int], set[int]]:
    """The JSONL log replayed as the CLI loads it: (header, final message records, numbers of
    the records that carried messages, of those rewound). A record that carried messages,
    none final and none rewound, was superseded."""
    header: dict[str, Any] = {}
    state: dict[str, Record] = {}
    bearing: set[int] = set()
    rewound: set[int] = set()
    for n, obj in lines:
        if isinstance(obj.get("$rewindTo"), str):
            ids = list(state)
            cut = ids[ids.index(obj["$rewindTo"]) :] if obj["$rewindTo"] in state else ids
            rewound.update(state.pop(i)[0] for i in cut)
            parsed.skip("rewind marker")
        elif isinstance(obj.get("id"), str):
            state[obj["id"]] = (n, obj)
            bearing.add(n)
        elif isinstance(obj.get("$set"), dict) or _is_header(obj):
            update = obj["$set"] if isinstance(obj.get("$set"), dict) else obj
            header.update({k: v for k, v in update.items() if k != "messages"})
            if not isinstance(update.get("messages"), list):
                parsed.skip("metadata update" if "$set" in obj else "session metadata")
                continue
            bearing.add(n)
            state = {
                m["id"]: (n, m)
                for m in update["messages"]
                if isinstance(m, dict) and isinstance(m.get("id"), str)
            }
        else:
            why = "not a Gemini CLI session record (no id, $set, $rewindTo or sessionId)"
            parsed.rejects.append(Reject(file, n, why, "malformed", excerpt(obj)))
    return header, list(state.values()), bearing, rewound


def _checkpoint(file: str, history: list[Any], parsed: Parsed) -> list[Record]:
    """Content entries as session-like message records (records numbered from 1)."""
    out: list[Record] = []
    for n, content in enumerate(history, start=1):
        role = content.get("role") if isinstance(content, dict) else None
        parts = content.get("parts") if isinstance(content, dict) else None
        if role not in ("user", "model") or not isinstance(parts, list):
            why = "not a Content {role: user|model, parts: [...]}"
            parsed.rejects.append(Reject(file, n, why, "malformed", excerpt(content)))
        elif role == "user":
            out.append((n, {"type": "user", "content": parts}))
        else:
            calls = [
                p["functionCall"]
                for p in parts
                if isinstance(p, dict) and isinstance(p.get("functionCall"), dict)
            ]
            tool_calls = [
                {"id": c.get("id") or f"call_{n}_{i}", "name": c.get("name"), "args": c.get("args")}
                for i, c in enumerate(calls)
            ]
            out.append((n, {"type": "gemini", "content": parts, "toolCalls": tool_calls}))
    return out


def _account(parsed: Parsed, chat: _Chat, numbers: set[int], rewound: set[int]) -> None:
    """Each message-bearing record's one fate: merged, rejected, skipped by kind, rewound
    (a `dropped` reject) or superseded (skipped)."""
    for n in sorted(numbers - chat.merged):
        if n in chat.bad:
            parsed.rejects.append(chat.bad[n])
        elif n in chat.kinds:
            parsed.skip(chat.kinds[n])
        elif n in rewound:
            why = "removed by a later $rewindTo (the user rewound the conversation)"
            parsed.rejects.append(Reject(chat.file, n, why, "dropped"))
        else:
            parsed.skip("superseded update")


def convert_session(file: str, doc: Any, keep_reasoning: bool = True) -> Parsed:
    """A session object or checkpoint value → its trace, rejects and skipped records."""
    parsed, chat = Parsed(), _Chat(file, keep_reasoning)
    if isinstance(doc, dict) and isinstance(doc.get("messages"), list):
        records = list(enumerate(doc["messages"], start=1))
        header, sid = (
            {**doc, "format": "session json"},
            str(doc.get("sessionId") or Path(file).stem),
        )
    elif isinstance(doc, list) or (isinstance(doc, dict) and isinstance(doc.get("history"), list)):
        history = doc if isinstance(doc, list) else doc["history"]
        records = _checkpoint(file, history, parsed)
        header, sid = {"format": "checkpoint"}, Path(file).stem
        parsed.records = len(history)
    else:
        raise InputError(
            f"{file}: not a Gemini CLI session (an object with messages) or checkpoint "
            "(a list of Content, or an object with history)"
        )
    parsed.records = parsed.records or len(records)
    for n, msg in records:
        if isinstance(msg, dict):
            chat.add(n, msg)
        else:
            chat.bad[n] = Reject(file, n, "message is not an object", "malformed", excerpt(msg))
    _finish(parsed, chat, sid, header, {n for n, _ in records}, set())
    return parsed


def convert_log(file: str, lines: list[Record], keep_reasoning: bool = True) -> Parsed:
    """A JSONL session log's parsed lines → its trace, rejects and skipped records."""
    parsed, chat = Parsed(), _Chat(file, keep_reasoning)
    header, final, bearing, rewound = _replay(file, lines, parsed)
    for n, msg in final:
        chat.add(n, msg)
    sid = str(header.get("sessionId") or Path(file).stem)
    header["format"] = "session jsonl"
    _finish(parsed, chat, sid, header, bearing, rewound)
    return parsed


def _finish(
    parsed: Parsed,
    chat: _Chat,
    sid: str,
    header: dict,
    numbers: set[int],
    rewound: set,
) -> None:
    _account(parsed, chat, numbers, rewound)
    trace = chat.trace(sid, header)
    if trace is not None:
        parsed.traces.append(trace)


def looks_like_gemini(path: Path) -> bool:
    """A Gemini CLI session (JSON or JSONL, by its first keys) or `/chat save` checkpoint."""
    path = Path(path)
    if path.is_dir():
        return False
    if path.suffix == ".jsonl":
        first = sniff_lines(path, 1)
        return bool(first) and _is_header(first[0])
    head = sniff_text(path)
    if head.lstrip().startswith("{") and '"sessionId"' in head and '"projectHash"' in head:
        return True
    return (
        bool(_CHECKPOINT.match(head))
        and bool(re.search(r'"role"\s*:\s*"model"', head))
        and '"parts"' in head
    )


@document_ingester("gemini_cli", detect=looks_like_gemini)
def gemini_cli(**options: Any) -> DocumentConverter:
    """Gemini CLI sessions and checkpoints: one trace per file."""
    check_options("gemini_cli", options, {"reasoning"})
    mode = options.get("reasoning", "keep")
    if mode not in ("keep", "drop"):
        raise InputError("ingester 'gemini_cli': option reasoning must be 'keep' or 'drop'")

    def convert(source: Path) -> Parsed:
        if source.is_dir():
            raise InputError(
                f"{source}: is a folder; give its session files ({source}/session-*.json*), "
                "or use --format auto, which walks folders"
            )
        keep = mode == "keep"
        if source.suffix != ".jsonl":
            return convert_session(str(source), load_json_document(source), keep)
        rejects: list[Reject] = []
        parsed = convert_log(str(source), list(read_json_lines(source, rejects)), keep)
        parsed.rejects[:0] = rejects
        parsed.records = len(line_census(source)[0])
        return parsed

    return convert
