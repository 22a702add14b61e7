"""Ingester `codex_cli`: OpenAI Codex CLI session rollouts (`~/.codex/sessions/…/rollout-*.jsonl`).

Run: `tuneloop ingest --format codex_cli rollout-2025-09-19T17-02-12-….jsonl --out t.jsonl`, or
`tuneloop ingest --format auto ~/.codex/sessions --out t.jsonl` (auto walks the date folders).

A rollout is one session: JSONL lines `{timestamp, type, payload}`. Records are the file's
non-blank lines, numbered by line. One trace per file (`source_id` and `metadata.session_id`:
the `session_meta` id). Conversion:
- `response_item`s are the conversation, as the model saw it: `message` (user → user,
  assistant → assistant, developer/system → system; images as `[image]`), `function_call`,
  `custom_tool_call` (freeform input, kept as arguments `{"input": "<text>"}`) and
  `local_shell_call` (arguments: its `action`) become tool calls; consecutive calls share
  one assistant message (Codex runs them in parallel: several calls, then their outputs).
  `*_output` items become tool messages paired BY `call_id`. An output that is a JSON string
  `{"output": "...", "metadata": {"exit_code": n}}` (Codex ≤ 0.4x shell calls) is decoded:
  the inner `output` is the content and a non-zero exit code marks it `is_error`; any other
  output string is kept verbatim; a list of content items is joined (images as `[image]`);
  `{content, success: false}` is an error. `reasoning` summary and visible content become the
  next assistant message's reasoning (option `reasoning: keep|drop`, default keep); a
  reasoning item that only carries `encrypted_content` is skipped as `encrypted reasoning` —
  the blob is never text.
- `event_msg`s are mostly the UI's copy of the same content: `user_message`,
  `agent_message`, `agent_reasoning*` matching a response item's text, and tool-end events
  (`exec_command_end`, `patch_apply_end`, `mcp_tool_call_end`, …) naming a call of the file
  are skipped as `duplicate event`. An event whose text no response item carries (rollouts
  that persisted only the events) is kept as the message it is. `token_count` is skipped as
  `token count` after its last cumulative usage is read into `metadata.tokens`; turn
  start/complete/abort markers as `turn marker`; other known UI events as `ui-only`.
- `thread_rolled_back` (the user undid the last N turns) removes those turns: their records
  are `dropped` rejects. `compacted` summaries go to `metadata.compactions` (skipped as
  `compaction`). `session_meta` and `turn_context` are skipped as their kind after their id,
  cwd, CLI version, git info, model and timestamps are read.
Deliberately left out of the messages: the Codex harness's own prompt (`session_meta`'s
`base_instructions`, the same for every session; its length is in metadata), hosted tool calls
with no result in the file (`web_search_call`: queries in `metadata.web_searches`; skipped as
`hosted tool call`), ghost snapshots (`snapshot`). Unknown record types are `unsupported`
rejects, an output for a call the file never made a `malformed` one.

A document ingester although the file is JSONL: line ingesters cannot yet count records
skipped by kind, and a rollout is one session per file anyway. One source is one file: given a
folder (`~/.codex/sessions`), `tuneloop ingest` reads the rollouts under it (`sources.py`); the
converter itself refuses a folder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tuneloop.data.ingest.base import (
    Category,
    Reject,
    check_options,
    excerpt,
    line_census,
    read_json_lines,
)
from tuneloop.data.ingest.chat import BadMessage, content_text
from tuneloop.data.ingest.detect import sniff_lines
from tuneloop.data.ingest.documents import Parsed, document_ingester
from tuneloop.errors import InputError
from tuneloop.plugins import DocumentConverter
from tuneloop.records.trace import Message, ToolCall, Trace

ROLLOUT_TYPES = frozenset(
    {"session_meta", "turn_context", "response_item", "event_msg", "compacted"}
)
CALLS = ("function_call", "custom_tool_call", "local_shell_call")
OUTPUTS = ("function_call_output", "custom_tool_call_output")
TOOL_END_EVENTS = frozenset(
    {"exec_command_end", "patch_apply_end", "mcp_tool_call_end", "view_image_tool_call"}
    | {"dynamic_tool_call_response", "collab_agent_spawn_end", "collab_agent_interaction_end"}
    | {"collab_waiting_end", "collab_close_end", "collab_resume_end"}
)
"""UI copies of a tool call's end, naming its `call_id`: duplicates of the `*_output` item."""
EVENT_SKIPS = {
    **dict.fromkeys(("web_search_end", "image_generation_end"), "duplicate event"),
    **dict.fromkeys(("task_started", "task_complete", "turn_started"), "turn marker"),
    **dict.fromkeys(("turn_complete", "turn_aborted"), "turn marker"),
    **dict.fromkeys(("context_compacted", "entered_review_mode", "exited_review_mode"), "ui-only"),
    **dict.fromkeys(("thread_goal_updated", "item_completed", "sub_agent_activity"), "ui-only"),
    **dict.fromkeys(("error", "warning", "plan_update"), "ui-only"),
}
"""Events skipped whole, by the kind the report counts them under."""
SKIPPED_ITEMS = {
    "web_search_call": "hosted tool call",
    "image_generation_call": "hosted tool call",
    "ghost_snapshot": "snapshot",
    "compaction": "compaction",
    "compaction_summary": "compaction",
    "context_compaction": "compaction",
    "additional_tools": "tool list",
}
SESSION_KEYS = (
    "cwd",
    "originator",
    "cli_version",
    "source",
    "model_provider",
    "forked_from_id",
    "git",
)
CONTEXT_PREFIXES = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions")
"""User-role messages Codex writes itself (not a turn the user typed; rollback counts turns)."""

Line = tuple[int, dict[str, Any]]


class _Texts:
    """Texts the response items carry, each matched by at most one event."""

    def __init__(self) -> None:
        self._left: dict[str, list[str]] = {}

    def add(self, kind: str, text: str | None) -> None:
        if text and text.strip():
            self._left.setdefault(kind, []).append(text.strip())

    def take(self, kind: str, text: Any) -> bool:
        """Whether `text` is a response item's text of `kind` (exact, else contained in one:
        a prompt with images carries extra parts); a match is used up."""
        if not isinstance(text, str) or not text.strip():
            return False
        left, text = self._left.get(kind, []), text.strip()
        i = (
            left.index(text)
            if text in left
            else next((i for i, h in enumerate(left) if text in h), -1)
        )
        if i < 0:
            return False
        del left[i]
        return True


def _item_texts(lines: list[Line]) -> tuple[_Texts, set[str]]:
    """(texts of the response items by kind, call ids of the response items)."""
    texts, calls = _Texts(), set()
    for _, obj in lines:
        p = obj.get("payload")
        if obj.get("type") != "response_item" or not isinstance(p, dict):
            continue
        kind = p.get("type")
        if kind == "message" and p.get("role") in ("user", "assistant"):
            texts.add(str(p["role"]), _text(p.get("content")))
        elif kind == "reasoning":
            for part in _parts(p.get("summary")) + _parts(p.get("content")):
                texts.add("reasoning", part)
        if isinstance(p.get("call_id"), str):
            calls.add(p["call_id"])
    return texts, calls


def _parts(value: Any) -> list[str]:
    if not isinstance(value, list):
        return []
    return [str(x["text"]) for x in value if isinstance(x, dict) and isinstance(x.get("text"), str)]


def _text(content: Any) -> str | None:
    try:
        return content_text(content)
    except BadMessage:
        return json.dumps(content, ensure_ascii=False)


def output_text(output: Any) -> tuple[str, bool | None]:
    """(content, is_error) of a tool output as Codex logs it (see the module docstring)."""
    if isinstance(output, str):
        if output.startswith("{"):
            try:
                decoded = json.loads(output)
            except json.JSONDecodeError:
                return output, None
            if isinstance(decoded, dict) and isinstance(decoded.get("output"), str):
                meta = decoded.get("metadata")
                code = meta.get("exit_code") if isinstance(meta, dict) else None
                failed = isinstance(code, int) and not isinstance(code, bool) and code != 0
                return decoded["output"], failed or None
        return output, None
    if isinstance(output, list):
        return _text(output) or "", None
    if isinstance(output, dict) and "content" in output:
        text, _ = output_text(output["content"])
        return text, (output.get("success") is False) or None
    return json.dumps(output, ensure_ascii=False), None


class _Session:
    """Accumulates one rollout's trace: messages with the records each was built from."""

    def __init__(self, file: str, keep_reasoning: bool) -> None:
        self.file = file
        self.keep_reasoning = keep_reasoning
        self.messages: list[Message] = []
        self.owners: list[list[int]] = []
        self.calls: set[str] = set()
        self.answered: set[str] = set()
        self.reasoning: list[str] = []
        self.reasoning_lines: list[int] = []
        self.parsed = Parsed()
        self.meta: dict[str, Any] = {}
        self.models: list[str] = []
        self.first_time: str | None = None
        self.last_time: str | None = None

    def reject(
        self, n: int, reason: str, category: Category = "malformed", obj: Any = None
    ) -> None:
        self.parsed.rejects.append(
            Reject(self.file, n, reason, category, excerpt(obj) if obj else "")
        )

    def append(self, n: int, message: Message) -> None:
        if message.role == "assistant" and self.reasoning:
            message.reasoning = "\n\n".join(self.reasoning)
            self.owners.append([n, *self.reasoning_lines])
            self.reasoning, self.reasoning_lines = [], []
        else:
            self.owners.append([n])
        self.messages.append(message)

    def open_assistant(self, n: int) -> Message:
        """The assistant message a call joins: the last message while no result has come."""
        if self.messages and self.messages[-1].role == "assistant" and not self.reasoning:
            self.owners[-1].append(n)
            return self.messages[-1]
        message = Message(role="assistant", content=None)
        self.append(n, message)
        return message

    def message(self, n: int, p: dict[str, Any]) -> None:
        role = {"developer": "system"}.get(str(p.get("role")), str(p.get("role")))
        if role not in ("user", "assistant", "system"):
            return self.reject(n, f"message role {role!r}", obj=p)
        self.append(n, Message(role=role, content=_text(p.get("content"))))  # type: ignore[arg-type]

    def call(self, n: int, p: dict[str, Any]) -> None:
        kind = p["type"]
        call_id = p.get("call_id") or p.get("id") or f"{kind}_{n}"
        if kind == "function_call":
            name, args = str(p.get("name")), p.get("arguments")
            args = args if isinstance(args, str) else json.dumps(args or {}, ensure_ascii=False)
        elif kind == "custom_tool_call":
            name, args = (
                str(p.get("name")),
                json.dumps({"input": p.get("input")}, ensure_ascii=False),
            )
        else:
            name, args = "local_shell", json.dumps(p.get("action") or {}, ensure_ascii=False)
        target = self.open_assistant(n)
        target.tool_calls = [
            *(target.tool_calls or []),
            ToolCall(id=str(call_id), name=name, arguments=args),
        ]
        self.calls.add(str(call_id))

    def output(self, n: int, p: dict[str, Any]) -> None:
        call_id = p.get("call_id")
        if call_id not in self.calls:
            why = f"{p['type']} for call_id {call_id!r}, which no call in this file made"
            return self.reject(n, why, obj=p)
        if call_id in self.answered:
            return self.reject(n, f"a second output for call_id {call_id!r}", "dropped")
        self.answered.add(call_id)
        text, failed = output_text(p.get("output"))
        self.append(n, Message(role="tool", content=text, tool_call_id=call_id, is_error=failed))

    def reason(self, n: int, p: dict[str, Any]) -> None:
        texts = _parts(p.get("summary")) + _parts(p.get("content"))
        if not texts:
            self.parsed.skip(
                "encrypted reasoning" if p.get("encrypted_content") else "empty reasoning"
            )
        elif not self.keep_reasoning:
            self.parsed.skip("reasoning (option reasoning: drop)")
        else:
            self.reasoning.append("\n\n".join(texts))
            self.reasoning_lines.append(n)

    def rollback(self, n: int, turns: Any) -> None:
        """Remove the last `turns` user turns (Codex `thread_rolled_back`)."""
        starts = [
            i
            for i, m in enumerate(self.messages)
            if m.role == "user" and not (m.content or "").lstrip().startswith(CONTEXT_PREFIXES)
        ]
        if not isinstance(turns, int) or turns <= 0 or not starts:
            return
        cut = starts[-min(turns, len(starts))]
        for m in (m for owner in self.owners[cut:] for m in owner):
            self.reject(m, f"rolled back by the user (line {n}: thread_rolled_back)", "dropped")
        for message in self.messages[cut:]:
            for c in message.tool_calls or []:
                self.calls.discard(c.id)
        del self.messages[cut:], self.owners[cut:]

    def trace(self) -> Trace | None:
        for n in self.reasoning_lines:  # reasoning no assistant message followed
            self.reject(n, "reasoning with no reply after it (session cut off)", "dropped")
        if not self.messages:
            return None
        unanswered = [
            c.id for m in self.messages for c in m.tool_calls or [] if c.id not in self.answered
        ]
        meta = dict(self.meta)
        if unanswered:
            meta["unanswered_calls"] = unanswered
        if len(self.models) > 1:
            meta["models"] = self.models
        sid = str(meta.get("session_id") or Path(self.file).stem)
        return Trace(
            source="codex_cli",
            source_id=sid,
            source_file=self.file,
            source_lines=sorted({n for owner in self.owners for n in owner}),
            messages=self.messages,
            model=self.models[-1] if self.models else None,
            started_at=meta.pop("started_at", None) or self.first_time,
            ended_at=self.last_time,
            metadata=meta,
        )


def _session_meta(s: _Session, p: dict[str, Any]) -> None:
    if "session_id" in s.meta:  # a resumed or forked file repeats it; the first names the session
        s.meta.setdefault("other_session_ids", []).append(p.get("id"))
        return
    s.meta["session_id"] = p.get("id")
    s.meta["started_at"] = p.get("timestamp")
    for key in SESSION_KEYS:
        if p.get(key) not in (None, {}, ""):
            s.meta[key] = p[key]
    base = p.get("base_instructions") or p.get("instructions")
    text = base.get("text") if isinstance(base, dict) else base
    if isinstance(text, str):
        s.meta["base_instructions_chars"] = len(text)


def _turn_context(s: _Session, p: dict[str, Any]) -> None:
    model = p.get("model")
    if isinstance(model, str) and (not s.models or s.models[-1] != model):
        s.models.append(model)
    for key in ("effort", "approval_policy"):
        if isinstance(p.get(key), str):
            s.meta[key] = p[key]


def _event(s: _Session, n: int, p: dict[str, Any], texts: _Texts, calls: set[str]) -> None:
    kind = p.get("type")
    if kind in ("user_message", "agent_message"):
        role = "user" if kind == "user_message" else "assistant"
        if texts.take(role, p.get("message")):
            s.parsed.skip("duplicate event")
        elif isinstance(p.get("message"), str):
            s.append(n, Message(role=role, content=p["message"]))  # type: ignore[arg-type]
        else:
            s.reject(n, f"{kind} without message text", obj=p)
    elif kind in ("agent_reasoning", "agent_reasoning_raw_content"):
        if texts.take("reasoning", p.get("text")) or not isinstance(p.get("text"), str):
            s.parsed.skip("duplicate event")
        else:
            s.reason(n, {"content": [{"text": p["text"]}]})
    elif kind in TOOL_END_EVENTS:
        s.parsed.skip("duplicate event" if p.get("call_id") in calls else "ui-only")
    elif kind == "token_count":
        info = p.get("info")
        if isinstance(info, dict) and isinstance(info.get("total_token_usage"), dict):
            s.meta["tokens"] = info["total_token_usage"]
        s.parsed.skip("token count")
    elif kind == "thread_rolled_back":
        s.rollback(n, p.get("num_turns"))
        s.parsed.skip("rollback marker")
    elif kind in EVENT_SKIPS:
        if kind == "turn_aborted":
            s.meta["aborted_turns"] = s.meta.get("aborted_turns", 0) + 1
        s.parsed.skip(EVENT_SKIPS[str(kind)])
    else:
        s.reject(n, f"event_msg {kind!r} is not a known Codex event", "unsupported")


def _item(s: _Session, n: int, p: dict[str, Any]) -> None:
    kind = p.get("type")
    if kind == "message":
        s.message(n, p)
    elif kind in CALLS:
        s.call(n, p)
    elif kind in OUTPUTS:
        s.output(n, p)
    elif kind == "reasoning":
        s.reason(n, p)
    elif kind in SKIPPED_ITEMS:
        if kind == "web_search_call" and isinstance(p.get("action"), dict):
            query = p["action"].get("query")
            if query:
                s.meta.setdefault("web_searches", []).append(query)
        s.parsed.skip(SKIPPED_ITEMS[str(kind)])
    else:
        s.reject(n, f"response_item {kind!r} is not a conversation item", "unsupported")


def convert_rollout(file: str, lines: list[Line], keep_reasoning: bool = True) -> Parsed:
    """One rollout's parsed lines → its trace, rejects and skipped records (no I/O)."""
    s = _Session(file, keep_reasoning)
    texts, calls = _item_texts(lines)
    for n, obj in lines:
        kind, p = obj.get("type"), obj.get("payload")
        if isinstance(obj.get("timestamp"), str):
            s.first_time = s.first_time or obj["timestamp"]
            s.last_time = obj["timestamp"]
        if kind not in ROLLOUT_TYPES or not isinstance(p, dict):
            why = (
                "no payload object"
                if kind in ROLLOUT_TYPES
                else f"record type {kind!r} is not a rollout item"
            )
            s.reject(n, why, obj=obj)
        elif kind == "session_meta":
            _session_meta(s, p)
            s.parsed.skip("session_meta")
        elif kind == "turn_context":
            _turn_context(s, p)
            s.parsed.skip("turn_context")
        elif kind == "compacted":
            s.meta.setdefault("compactions", []).append(
                {"at_message": len(s.messages), "summary": p.get("message")}
            )
            s.parsed.skip("compaction")
        elif kind == "event_msg":
            _event(s, n, p, texts, calls)
        else:
            _item(s, n, p)
    trace = s.trace()
    if trace is not None:
        s.parsed.traces.append(trace)
    return s.parsed


def looks_like_codex_rollout(path: Path) -> bool:
    """A JSONL file whose first records are Codex rollout items (`{type, payload}`)."""
    if Path(path).is_dir():
        return False
    lines = sniff_lines(path)
    return bool(lines) and all(
        o.get("type") in ROLLOUT_TYPES and isinstance(o.get("payload"), dict) for o in lines
    )


@document_ingester("codex_cli", detect=looks_like_codex_rollout)
def codex_cli(**options: Any) -> DocumentConverter:
    """Codex CLI rollouts: one trace per session file."""
    check_options("codex_cli", options, {"reasoning"})
    mode = options.get("reasoning", "keep")
    if mode not in ("keep", "drop"):
        raise InputError("ingester 'codex_cli': option reasoning must be 'keep' or 'drop'")

    def convert(source: Path) -> Parsed:
        if source.is_dir():
            raise InputError(
                f"{source}: is a folder; give its rollout files ({source}/**/rollout-*.jsonl), "
                "or use --format auto, which walks folders"
            )
        rejects: list[Reject] = []
        lines = list(read_json_lines(source, rejects))
        parsed = convert_rollout(str(source), lines, keep_reasoning=mode == "keep")
        parsed.rejects[:0] = rejects
        parsed.records = len(line_census(source)[0])
        return parsed

    return convert
