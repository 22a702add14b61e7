"""Ingester `cline`: Cline and Roo Code task folders (`…/globalStorage/<extension>/tasks/<id>/`).

Run: `tuneloop ingest --format cline ~/.config/Code/User/globalStorage/saoudrizwan.claude-dev/
tasks/1769064454592 -o t.jsonl` — a task folder, or its `api_conversation_history.json` (the
files beside it are read too); `--format auto` on `tasks/` finds each task folder.

A task folder is one session and becomes one trace (`source_id` and `metadata.session_id`:
the task id, the folder's name). It holds:
- `api_conversation_history.json` (`claude_messages.json` before Cline 2.0): the conversation
  as sent to the model, Anthropic-style `{role, content}` messages (newer versions add `ts`,
  `modelInfo`, `metrics`; Roo Code adds `isSummary`, truncation markers, reasoning items);
- `ui_messages.json`: the chat panel's rows. Not the conversation: each row is skipped as
  `ui-only` (`ui-partial` for a streaming row), but read for the timestamps (`ts`), the model
  (`modelInfo`, when messages lack it) and the usage (`api_req_started` rows' text is JSON in
  a JSON string: tokens and cost, summed into `metadata.usage`);
- `task_metadata.json` (newer Cline): the model and the Cline version.
Records, numbered from 1 in this order: the API messages (record k is element k-1 of the API
file), the UI rows, then `task_metadata.json` (one record).

Conversion of the API messages:
- assistant `text` → content, `tool_use` → tool calls (id, name, input as JSON), `thinking`
  and Roo's `reasoning` blocks → reasoning (option `reasoning: drop` leaves it out; a
  signature is never text); encrypted reasoning (`redacted_thinking`, `encrypted_content`) is
  counted in `metadata.skipped_blocks`;
- user `tool_result` blocks → `tool` messages, paired BY ID (`tool_use_id`);
- results as plain text (the trap): Cline sends most results back as a user text block
  `[read_file for 'src/a.ts'] Result:\n…` (before 3.x a header block, then the result block
  and its images) even for a real `tool_use` with an id, and answers a second call of one
  message with `Tool [read_file] was not executed because …`. Such a block is paired BY ORDER
  AND NAME with the first unanswered call of that name (else one whose name holds it:
  `[subagents]` answers `use_subagents`) in the previous assistant message and becomes a
  `tool` message, kept verbatim (the header is what the model saw). A result naming no open
  call stays user text (`metadata.unpaired_tool_results`);
- XML tool calls (Cline before native tools, Roo's XML mode): when an assistant message has no
  `tool_use` block, its top-level `<tool>…</tool>` elements for the tools the next message's
  results name (or a turn-ending tool such as `attempt_completion`) become tool calls (child
  elements → arguments; the XML leaves the content), with deterministic ids
  `cline_<record>_<k>`, then paired as above;
- Roo Code: a reasoning item's summary is the next assistant message's reasoning (an
  encrypted-only item is skipped as `encrypted reasoning`); an `isSummary` message (context
  condensing) goes to `metadata.compactions` with the message index it applied at; a
  truncation marker is skipped as `truncation marker`;
- a message left with no text and no calls is skipped as `empty message`.
`model` is the first assistant message's; later switches go to `metadata.model_switches`.
Deliberately not kept: the copy of each request in `api_req_started` rows, checkpoint hashes,
the files in context.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from tuneloop.data.ingest.base import Reject, check_options
from tuneloop.data.ingest.chat import content_text, iso_time
from tuneloop.data.ingest.detect import sniff_text
from tuneloop.data.ingest.documents import Parsed, document_ingester, load_json_document, reject
from tuneloop.errors import InputError
from tuneloop.plugins import DocumentConverter
from tuneloop.records.trace import Message, ToolCall, Trace

API_FILES = ("api_conversation_history.json", "claude_messages.json")
UI_FILE = "ui_messages.json"
METADATA_FILE = "task_metadata.json"
RESULT = re.compile(r"\A\[([A-Za-z_][\w.-]*)(?:(?: for |: )[\s\S]*?)?\] Result:")
NOTICE = re.compile(
    r"\A(?:Tool|Skipping tool) \[([A-Za-z_][\w.-]*)(?: for [\s\S]*?)?\] (?:was not executed"
    r"|was interrupted and not executed|due to user rejecting)"
)
TURN_ENDING = frozenset(
    {"attempt_completion", "ask_followup_question", "plan_mode_respond", "new_task"}
)
"""Tools whose XML call may end a task with no result after it."""
USAGE = {
    "tokensIn": "tokens_in",
    "tokensOut": "tokens_out",
    "cacheWrites": "cache_writes",
    "cacheReads": "cache_reads",
    "cost": "cost_usd",
}
_PARAM = re.compile(r"<([A-Za-z_][\w-]*)>([\s\S]*?)</\1>")


def is_cline_task(path: Path) -> bool:
    """A Cline/Roo task folder, or its API conversation file (by name, then a JSON array)."""
    if path.is_dir():
        return any((path / name).is_file() for name in API_FILES)
    return path.name in API_FILES and sniff_text(path, 64).lstrip().startswith("[")


@document_ingester("cline", detect=is_cline_task)
def cline(**options: Any) -> DocumentConverter:
    """Cline / Roo Code task folders: one trace per task."""
    check_options("cline", options, {"reasoning"})
    keep = options.get("reasoning", "keep")
    if keep not in ("keep", "drop"):
        raise InputError("ingester 'cline': option reasoning must be 'keep' or 'drop'")

    def convert(source: Path) -> Parsed:
        return read_task(source, keep_reasoning=keep == "keep")

    return convert


def read_task(source: Path, *, keep_reasoning: bool = True) -> Parsed:
    """One task folder (or its API file) → a `Parsed` with at most one trace."""
    source = Path(source)
    folder = source if source.is_dir() else source.parent
    api = (
        source
        if source.is_file()
        else next((folder / n for n in API_FILES if (folder / n).is_file()), None)
    )
    if api is None:
        raise InputError(
            f"{source}: not a Cline task folder (no {API_FILES[0]}); give a task folder "
            "`tasks/<id>/` or its api_conversation_history.json"
        )
    history = load_json_document(api)
    if not isinstance(history, list):
        got = type(history).__name__
        raise InputError(f"{api}: expected a JSON array of messages, got {got}")
    parsed = Parsed(records=len(history))
    task = _Task(str(api), keep_reasoning)
    for i, msg in enumerate(history):
        task.add(i + 1, msg, history[i + 1] if i + 1 < len(history) else None, parsed)
    _read_ui(folder / UI_FILE, task, parsed)
    _read_metadata(folder / METADATA_FILE, task, parsed)
    trace = task.trace(folder.name)
    if trace is not None:
        parsed.traces.append(trace)
    else:
        why = "task has no conversation turns"
        parsed.rejects.extend(Reject(str(api), n, why, "dropped") for n in task.lines)
    return parsed


class _Task:
    """Accumulates one task's messages, pairing tool results with the calls they answer."""

    def __init__(self, file: str, keep_reasoning: bool) -> None:
        self.file = file
        self.keep = keep_reasoning
        self.messages: list[Message] = []
        self.lines: list[int] = []
        self.open_calls: list[ToolCall] = []
        self.carried: list[str] = []  # a Roo reasoning item, for the next assistant message
        self.models: list[tuple[int, str]] = []
        self.times: list[int] = []
        self.meta: dict[str, Any] = {}
        self.skipped_blocks: Counter[str] = Counter()
        self.unpaired = 0

    def add(self, n: int, msg: Any, following: Any, parsed: Parsed) -> None:
        """Record `n` (message n-1 of the API file); `following` is the message after it."""
        if not isinstance(msg, dict):
            parsed.rejects.append(reject(self.file, n, f"message {n - 1}: not an object", msg))
            return
        if isinstance(msg.get("ts"), int | float):
            self.times.append(int(msg["ts"]))
        role, content = msg.get("role"), msg.get("content")
        if msg.get("type") == "reasoning" and role is None:
            texts, _ = reasoning_texts(msg)
            if not any(t.strip() for t in texts) or not self.keep:
                parsed.skip(
                    "reasoning (option reasoning: drop)" if texts else "encrypted reasoning"
                )
                return
            self.carried += texts
        elif msg.get("isTruncationMarker"):
            parsed.skip("truncation marker")
            return
        elif role not in ("user", "assistant") or not isinstance(content, str | list):
            reason = f"message {n - 1}: expected role user/assistant and content a string or list"
            parsed.rejects.append(reject(self.file, n, reason, msg))
            return
        elif msg.get("isSummary"):
            summary = {"at_message": len(self.messages), "summary": content_text(content) or ""}
            self.meta.setdefault("compactions", []).append(summary)
        else:
            before = len(self.messages)
            if role == "user":
                self._user(_blocks(content))
            else:
                self._assistant(n, msg, _blocks(content), _named_tools(following))
            if len(self.messages) == before:
                parsed.skip("empty message")
                return
        self.lines.append(n)

    def _user(self, blocks: list[Any]) -> None:
        text: list[str] = []
        i = 0
        while i < len(blocks):
            block, i = blocks[i], i + 1
            if _kind(block) == "tool_result":
                call = self._take(call_id=str(block.get("tool_use_id")))
                body, is_error = _result_text(block.get("content")), block.get("is_error")
                self.unpaired += call is None
            else:
                body, is_error = content_text([block]) or "", None
                name = _named_tool(body)
                call = self._take(name=name) if name else None
                if call is None and name:
                    self.unpaired += 1
                header_only = RESULT.match(body) and RESULT.sub("", body, 1).strip() == ""
                if call is not None and header_only and i < len(blocks):
                    # Before Cline 3.x: a header block, then the result block and its images.
                    absorbed = [blocks[i]]
                    i += 1
                    while i < len(blocks) and _kind(blocks[i]) == "image":
                        absorbed, i = [*absorbed, blocks[i]], i + 1
                    body = f"{body}\n{content_text(absorbed) or ''}"
            if call is None:
                text.append(body)
                continue
            self._flush(text)
            self.messages.append(
                Message(
                    role="tool",
                    content=body,
                    tool_call_id=call.id,
                    name=call.name,
                    is_error=bool(is_error) or None,
                )
            )
        self._flush(text)
        self.open_calls = []

    def _take(self, *, call_id: str | None = None, name: str | None = None) -> ToolCall | None:
        """The first open call with this id, or this name (else one whose name holds it: a
        `[subagents]` result answers `use_subagents`), removed from the open calls."""
        for same in (True, False):
            for j, call in enumerate(self.open_calls):
                if call_id is not None and call.id == call_id:
                    return self.open_calls.pop(j)
                if name and (call.name == name if same else name in call.name):
                    return self.open_calls.pop(j)
        return None

    def _flush(self, text: list[str]) -> None:
        if any(t.strip() for t in text):
            self.messages.append(Message(role="user", content="\n".join(text)))
        text.clear()

    def _assistant(self, n: int, msg: dict[str, Any], blocks: list[Any], names: set[str]) -> None:
        text: list[str] = []
        reasoning, self.carried = self.carried, []
        calls: list[ToolCall] = []
        for block in blocks:
            kind = _kind(block)
            if kind == "text":
                text.append(str(block.get("text") or ""))
            elif kind in ("thinking", "reasoning"):
                reasoning += self._reasoning([block])
            elif kind == "tool_use":
                arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
                call_id = str(block.get("id") or f"cline_{n}_{len(calls)}")
                calls.append(ToolCall(id=call_id, name=str(block.get("name")), arguments=arguments))
            elif kind in ("image", "document"):
                text.append(content_text([block]) or "")
            else:
                self.skipped_blocks[str(kind)] += 1
        if not any(r.strip() for r in reasoning):  # provider reasoning kept beside the blocks
            holders = [msg, *(b for b in blocks if _kind(b) == "text")]
            reasoning = self._reasoning(holders, details=True)
        content: str | None = "\n".join(text)
        if not calls:
            content, calls = xml_calls(content or "", TURN_ENDING | names, n)
        if not (content or "").strip() and not calls:
            return
        info = msg.get("modelInfo")
        if isinstance(info, dict) and isinstance(info.get("modelId"), str) and info["modelId"]:
            self.models.append((len(self.messages), info["modelId"]))
        self.messages.append(
            Message(
                role="assistant",
                content=content if (content or "").strip() else None,
                tool_calls=calls or None,
                reasoning="\n".join(reasoning) if any(r.strip() for r in reasoning) else None,
            )
        )
        self.open_calls = list(calls)

    def _reasoning(self, holders: list[dict[str, Any]], *, details: bool = False) -> list[str]:
        """The reasoning texts of `holders` (see `reasoning_texts`), encrypted parts counted
        in `skipped_blocks`; none when the option drops reasoning."""
        texts: list[str] = []
        for holder in holders:
            found, encrypted = reasoning_texts(holder, details=details)
            texts += found
            if encrypted:
                self.skipped_blocks["encrypted reasoning"] += encrypted
        return texts if self.keep else []

    def trace(self, task_id: str) -> Trace | None:
        if not self.messages:
            return None
        meta: dict[str, Any] = {"session_id": task_id, **self.meta}
        fallback = meta.pop("fallback_model", None)
        model = self.models[0][1] if self.models else fallback
        switches, current = [], model
        for at, name in self.models[1:]:
            if name != current:
                switches.append({"at_message": at, "model": name})
                current = name
        extras = {
            "model_switches": switches,
            "skipped_blocks": dict(self.skipped_blocks),
            "unpaired_tool_results": self.unpaired,
        }
        meta.update({k: v for k, v in extras.items() if v})
        start = self.times or ([int(task_id)] if task_id.isdigit() else [])
        return Trace(
            source="cline",
            source_id=task_id,
            source_file=self.file,
            source_lines=sorted(self.lines),
            messages=self.messages,
            model=model,
            started_at=iso_time(min(start)) if start else None,
            ended_at=iso_time(max(self.times)) if self.times else None,
            metadata=meta,
        )


def xml_calls(
    text: str, names: set[str] | frozenset[str], n: int
) -> tuple[str | None, list[ToolCall]]:
    """(text without them, calls) for the top-level `<tool>…</tool>` elements of `text`
    whose tag is in `names`; ids `cline_<n>_<k>`."""
    if not names or "<" not in text:
        return text, []
    tags = "|".join(map(re.escape, sorted(names)))
    pattern = re.compile(rf"<({tags})>([\s\S]*?)</\1>")
    calls: list[ToolCall] = []
    for found in pattern.finditer(text):
        params = {
            key: value.strip("\n") if key in ("content", "diff") else value.strip()
            for key, value in _PARAM.findall(found.group(2))
        }
        arguments = json.dumps(params, ensure_ascii=False)
        calls.append(
            ToolCall(id=f"cline_{n}_{len(calls)}", name=found.group(1), arguments=arguments)
        )
    if not calls:
        return text, []
    return pattern.sub("", text).rstrip() or None, calls


def _read_ui(path: Path, task: _Task, parsed: Parsed) -> None:
    """Count the UI rows (skipped), reading timestamps, the model and the usage from them."""
    if not path.is_file():
        return
    first = parsed.records + 1
    try:
        rows = load_json_document(path)
    except InputError as err:
        rows = err
    if not isinstance(rows, list):
        parsed.records += 1
        why = f"{UI_FILE}: {rows}" if isinstance(rows, InputError) else "expected a JSON array"
        parsed.rejects.append(reject(path, first, why))
        return
    parsed.records += len(rows)
    usage: Counter[str] = Counter()
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            parsed.rejects.append(reject(path, first + i, f"{UI_FILE} row {i}: not an object", row))
            continue
        parsed.skip("ui-partial" if row.get("partial") else "ui-only")
        if isinstance(row.get("ts"), int | float):
            task.times.append(int(row["ts"]))
        info = row.get("modelInfo")
        if isinstance(info, dict) and isinstance(info.get("modelId"), str):
            task.meta.setdefault("fallback_model", info["modelId"])
        if row.get("say") == "api_req_started" and isinstance(row.get("text"), str):
            try:
                request = json.loads(row["text"])
            except json.JSONDecodeError:
                continue
            if isinstance(request, dict):
                usage.update({USAGE[k]: v for k, v in request.items() if k in USAGE and _number(v)})
    if usage:
        task.meta["usage"] = {k: round(v, 6) for k, v in usage.items()}


def _read_metadata(path: Path, task: _Task, parsed: Parsed) -> None:
    """`task_metadata.json` → the Cline version and, for messages without one, the model."""
    if not path.is_file():
        return
    parsed.records += 1
    try:
        data = load_json_document(path)
    except InputError as err:
        data = err
    if not isinstance(data, dict):
        why = f"{METADATA_FILE}: {data}" if isinstance(data, InputError) else "not an object"
        parsed.rejects.append(reject(path, parsed.records, why))
        return
    usage = [u for u in data.get("model_usage") or [] if isinstance(u, dict)]
    if usage and isinstance(usage[0].get("model_id"), str):
        task.meta["fallback_model"] = usage[0]["model_id"]
    env = [e for e in data.get("environment_history") or [] if isinstance(e, dict)]
    if env and isinstance(env[-1].get("cline_version"), str):
        task.meta["cline_version"] = env[-1]["cline_version"]
    task.lines.append(parsed.records)


def reasoning_texts(holder: dict[str, Any], *, details: bool = False) -> tuple[list[str], int]:
    """(texts, encrypted parts) of a `thinking` / `reasoning` block or reasoning item, or
    (`details`) of the `reasoning_content` / `reasoning_details` beside a message's blocks.
    A signature is never text."""
    keys = ("reasoning_content",) if details else ("thinking", "text")
    texts = [holder[k] for k in keys if isinstance(holder.get(k), str)]
    encrypted = 0
    parts = holder.get("reasoning_details" if details else "summary")
    for part in parts if isinstance(parts, list) else []:
        text = (part.get("text") or part.get("summary")) if isinstance(part, dict) else None
        if isinstance(text, str):
            texts.append(text)
        else:
            encrypted += 1
    if holder.get("encrypted_content") and not any(t.strip() for t in texts):
        encrypted += 1
    return texts, encrypted


def _blocks(content: str | list[Any]) -> list[Any]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _kind(block: Any) -> Any:
    return block.get("type") if isinstance(block, dict) else None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _result_text(content: Any) -> str:
    if isinstance(content, str | list) or content is None:
        return content_text(content) or ""
    return json.dumps(content, ensure_ascii=False)


def _named_tool(text: str) -> str | None:
    """The tool a plain-text result (or a not-executed notice) names."""
    found = RESULT.match(text) or NOTICE.match(text)
    return found.group(1) if found else None


def _named_tools(msg: Any) -> set[str]:
    """The tools the plain-text results of a (user) message name."""
    content = msg.get("content") if isinstance(msg, dict) else None
    if not isinstance(content, str | list):
        return set()
    texts = [b.get("text") for b in _blocks(content) if isinstance(b, dict)]
    return {name for t in texts if isinstance(t, str) and (name := _named_tool(t))}
