"""Ingester `cline`: Cline and Roo Code task folders (`…/globalStorage/<extension>/tasks/<id>/`).

Run: `tuneloop ingest --format cline ~/.config/Code/User/globalStorage/saoudrizwan.claude-dev/
tasks/1769064454592 -o t.jsonl` — a task folder, or its `api_conversation_history.json` (the
files beside it are read too); `--format auto` on `tasks/` finds each task folder.

A task folder is one session and becomes one trace (`source_id` and `metadata.session_id`:
the task id, the folder's name). It holds:
- `api_conversation_history.json` (`claude_messages.json` before Cline 2.0): the conversation
  as sent to the model, Anthropic-style `{role, content}` messages (newer versions add `ts`,
  `modelInfo`, `metrics`; Roo Code adds `isSummary`, truncation markers and stand-alone
  `{"type": "reasoning"}` items). This is the conversation.
- `ui_messages.json`: the chat panel's rows (`say`/`ask` kinds, JSON inside JSON strings,
  `partial` streaming rows). Not the conversation: every row is skipped as `ui-only`
  (`ui-partial` for a streaming row); rows give the timestamps (`ts`), the model
  (`modelInfo`) when messages lack it, and the usage (`api_req_started` rows' tokens and cost,
  summed into `metadata.usage`).
- `task_metadata.json` (newer Cline): the model usage and the Cline version → metadata.
Records, numbered from 1 in this order: the API messages (record k is element k-1 of the API
file), the UI rows, then `task_metadata.json` (one record).

Conversion of the API messages:
- assistant `text` → content; `thinking` → reasoning (option `reasoning: drop` leaves it out;
  its `signature` is never text); `redacted_thinking` and encrypted `reasoning_details` are
  counted in `metadata.skipped_blocks`; `tool_use` → tool calls (id, name, input as JSON);
- user `tool_result` blocks → `tool` messages paired BY ID (`tool_use_id`);
- results as plain text (the trap): Cline sends most results back as a user text block
  `[read_file for 'src/a.ts'] Result:\n…` — before 3.x as a header block `[… ] Result:`
  followed by the result block (plus image blocks) — even when the call was a real
  `tool_use` with an id; a second call of one message is answered `Tool [read_file] was not
  executed because a tool has already been used in this message…`. Each such block is paired
  BY ORDER AND NAME with the first unanswered call of that name in the previous assistant
  message and becomes a `tool` message (content kept verbatim, header included: it is what
  the model saw). A result naming no open call stays user text, counted in
  `metadata.unpaired_tool_results`;
- XML tool calls (Cline before native tools, Roo Code's XML mode): when an assistant message
  has no `tool_use` block, top-level `<tool_name>…</tool_name>` elements in its text, for the
  tool names of Cline/Roo and those the next message's results name, become tool calls (child
  elements → arguments; the XML is removed from the content), with deterministic ids
  `cline_<record>_<k>`; then paired by order and name as above;
- Roo Code: a stand-alone reasoning item's summary text becomes the next assistant message's
  reasoning (encrypted-only items are skipped as `encrypted reasoning`), an `isSummary`
  message (context condensing) goes to `metadata.compactions` with the message index it
  applied at, a truncation marker is skipped as `truncation marker`;
- a message with nothing left (no text, no calls) is skipped as `empty message`.
Model switches within a task (per-message `modelInfo`) go to `metadata.model_switches`;
`model` is the first. Deliberately not kept: the `request` text of `api_req_started` rows (a
copy of the user message), checkpoint hashes, files in context.
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
RESULT = re.compile(r"\A\[([A-Za-z_][\w.-]*)(?: for [\s\S]*?)?\] Result:")
NOT_EXECUTED = re.compile(r"\ATool \[([A-Za-z_][\w.-]*)\] was not executed because")
TOOLS = frozenset(
    """execute_command read_file write_to_file replace_in_file apply_diff apply_patch
    insert_content search_and_replace search_files list_files list_code_definition_names
    codebase_search browser_action use_mcp_tool access_mcp_resource ask_followup_question
    attempt_completion plan_mode_respond act_mode_respond new_task switch_mode
    fetch_instructions load_mcp_documentation update_todo_list web_fetch web_search
    condense summarize_task report_bug new_rule run_slash_command generate_image""".split()
)
"""Cline and Roo Code tool names, for XML calls that no later result names (a last
`attempt_completion`)."""
_PARAM = re.compile(r"<([A-Za-z_][\w-]*)>([\s\S]*?)</\1>")
_VERBATIM = ("content", "diff")


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


def _task_files(source: Path) -> tuple[Path, Path]:
    """(API conversation file, task folder) of a source; InputError when it is neither."""
    folder = source if source.is_dir() else source.parent
    api = source if source.is_file() else None
    for name in API_FILES:
        if api is None and (folder / name).is_file():
            api = folder / name
    if api is None:
        raise InputError(
            f"{source}: not a Cline task folder (no {API_FILES[0]}); give a task folder "
            "`tasks/<id>/` or its api_conversation_history.json"
        )
    return api, folder


def read_task(source: Path, *, keep_reasoning: bool = True) -> Parsed:
    """One task folder (or its API file) → a `Parsed` with at most one trace."""
    api_file, folder = _task_files(Path(source))
    history = load_json_document(api_file)
    if not isinstance(history, list):
        got = type(history).__name__
        raise InputError(f"{api_file}: expected a JSON array of messages, got {got}")
    parsed = Parsed(records=len(history))
    task = _Task(str(api_file), keep_reasoning)
    for i, msg in enumerate(history):
        following = history[i + 1] if i + 1 < len(history) else None
        task.add(i + 1, msg, following, parsed)
    _read_ui(folder / UI_FILE, task, parsed)
    _read_metadata(folder / METADATA_FILE, task, parsed)
    trace = task.trace(folder.name)
    if trace is None:
        parsed.rejects.extend(
            Reject(str(api_file), n, "task has no conversation turns", "dropped")
            for n in task.lines
        )
    else:
        parsed.traces.append(trace)
    return parsed


class _Task:
    """Accumulates one task's messages, pairing tool results with the calls they answer."""

    def __init__(self, file: str, keep_reasoning: bool) -> None:
        self.file = file
        self.keep_reasoning = keep_reasoning
        self.messages: list[Message] = []
        self.lines: list[int] = []
        self.open_calls: list[ToolCall] = []
        self.carried: list[str] = []
        self.models: list[tuple[int, str]] = []
        self.times: list[int] = []
        self.meta: dict[str, Any] = {}
        self.skipped_blocks: Counter[str] = Counter()
        self.unpaired = 0

    def add(self, n: int, msg: Any, following: Any, parsed: Parsed) -> None:
        where = f"message {n - 1}"
        if not isinstance(msg, dict):
            parsed.rejects.append(reject(self.file, n, f"{where}: not an object", msg))
            return
        if isinstance(msg.get("ts"), int | float):
            self.times.append(int(msg["ts"]))
        if msg.get("type") == "reasoning" and "role" not in msg:
            self._reasoning_item(n, msg, parsed)
            return
        if msg.get("isTruncationMarker"):
            parsed.skip("truncation marker")
            return
        role, content = msg.get("role"), msg.get("content")
        if role not in ("user", "assistant") or not isinstance(content, str | list):
            reason = f"{where}: expected role user/assistant and content a string or a list"
            parsed.rejects.append(reject(self.file, n, reason, msg))
            return
        if msg.get("isSummary"):
            summary = content_text(content) or ""
            self.meta.setdefault("compactions", []).append(
                {"at_message": len(self.messages), "summary": summary}
            )
            self.lines.append(n)
            return
        before = len(self.messages)
        if role == "user":
            self._user(_blocks(content))
        else:
            self._assistant(n, msg, _blocks(content), _result_names(following))
        if len(self.messages) == before:
            parsed.skip("empty message")
        else:
            self.lines.append(n)

    def _reasoning_item(self, n: int, item: dict[str, Any], parsed: Parsed) -> None:
        summary = item.get("summary") if isinstance(item.get("summary"), list) else []
        text = "\n".join(s["text"] for s in summary if isinstance(s, dict) and s.get("text"))
        if not text:
            parsed.skip("encrypted reasoning")
        elif not self.keep_reasoning:
            parsed.skip("reasoning (option reasoning: drop)")
        else:
            self.carried.append(text)
            self.lines.append(n)

    def _user(self, blocks: list[Any]) -> None:
        text: list[str] = []
        i = 0
        while i < len(blocks):
            block, i = blocks[i], i + 1
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "tool_result":
                call = self._take(lambda c: c.id == str(block.get("tool_use_id")))
                body = _result_text(block.get("content"))
                if call is None:
                    self.unpaired += 1
                    text.append(body)
                    continue
                self._flush(text)
                self._tool(call, body, bool(block.get("is_error")))
                continue
            body = content_text([block]) or ""
            found = RESULT.match(body) or NOT_EXECUTED.match(body)
            if found is None:
                text.append(body)
                continue
            call = self._take(lambda c: c.name == found.group(1))
            if call is None:
                self.unpaired += 1
                text.append(body)
                continue
            if found.re is RESULT and not body[found.end() :].strip() and i < len(blocks):
                # Before Cline 3.x: a header block, then the result (a text block and images).
                absorbed = [blocks[i]]
                i += 1
                while i < len(blocks) and _kind(blocks[i]) == "image":
                    absorbed.append(blocks[i])
                    i += 1
                body = f"{body}\n{content_text(absorbed) or ''}"
            self._flush(text)
            self._tool(call, body, None)
        self._flush(text)
        self.open_calls = []

    def _take(self, match: Any) -> ToolCall | None:
        """The first open call `match` accepts, removed from the open calls."""
        for j, call in enumerate(self.open_calls):
            if match(call):
                return self.open_calls.pop(j)
        return None

    def _tool(self, call: ToolCall, body: str, is_error: bool | None) -> None:
        self.messages.append(
            Message(
                role="tool",
                content=body,
                tool_call_id=call.id,
                name=call.name,
                is_error=is_error or None,
            )
        )

    def _flush(self, text: list[str]) -> None:
        if any(t.strip() for t in text):
            self.messages.append(Message(role="user", content="\n".join(text)))
        text.clear()

    def _assistant(self, n: int, msg: dict[str, Any], blocks: list[Any], names: set[str]) -> None:
        text: list[str] = []
        reasoning = list(self.carried) if self.keep_reasoning else []
        self.carried = []
        calls: list[ToolCall] = []
        for block in blocks:
            kind = _kind(block)
            if kind == "text":
                text.append(str(block.get("text") or ""))
                reasoning += self._details(block.get("reasoning_details"))
            elif kind == "thinking":
                if self.keep_reasoning and block.get("thinking"):
                    reasoning.append(str(block["thinking"]))
            elif kind == "tool_use":
                arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
                call_id = str(block.get("id") or f"cline_{n}_{len(calls)}")
                calls.append(ToolCall(id=call_id, name=str(block.get("name")), arguments=arguments))
            elif kind in ("image", "document"):
                text.append(content_text([block]) or "")
            else:
                self.skipped_blocks[str(kind)] += 1
        if isinstance(msg.get("reasoning_content"), str) and self.keep_reasoning:
            reasoning.append(msg["reasoning_content"])
        if not any(r.strip() for r in reasoning):
            reasoning = self._details(msg.get("reasoning_details"))
        content: str | None = "\n".join(text)
        if not calls:
            content, calls = xml_calls(content or "", TOOLS | names, n)
        if not (content or "").strip() and not calls:
            return
        info = msg.get("modelInfo")
        model = info.get("modelId") if isinstance(info, dict) else None
        if isinstance(model, str) and model:
            self.models.append((len(self.messages), model))
        self.messages.append(
            Message(
                role="assistant",
                content=content if (content or "").strip() else None,
                tool_calls=calls or None,
                reasoning="\n".join(reasoning) if any(r.strip() for r in reasoning) else None,
            )
        )
        self.open_calls = list(calls)

    def _details(self, details: Any) -> list[str]:
        """Texts of OpenRouter-style `reasoning_details`; encrypted ones are counted."""
        out: list[str] = []
        for item in details if isinstance(details, list) else []:
            if isinstance(item, dict) and isinstance(item.get("text"), str):
                out.append(item["text"])
            elif isinstance(item, dict):
                self.skipped_blocks["encrypted reasoning"] += 1
        return out if self.keep_reasoning else []

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
        if switches:
            meta["model_switches"] = switches
        if self.skipped_blocks:
            meta["skipped_blocks"] = dict(self.skipped_blocks)
        if self.unpaired:
            meta["unpaired_tool_results"] = self.unpaired
        times = self.times or ([int(task_id)] if task_id.isdigit() else [])
        return Trace(
            source="cline",
            source_id=task_id,
            source_file=self.file,
            source_lines=sorted(self.lines),
            messages=self.messages,
            model=model,
            started_at=iso_time(min(times)) if times else None,
            ended_at=iso_time(max(self.times)) if self.times else None,
            metadata=meta,
        )


def xml_calls(
    text: str, names: set[str] | frozenset[str], n: int
) -> tuple[str | None, list[ToolCall]]:
    """(text without them, calls) for the top-level `<tool>…</tool>` elements in `text` whose
    tag is one of `names`; ids `cline_<n>_<k>`."""
    if not names or "<" not in text:
        return text, []
    pattern = re.compile(r"<(%s)>([\s\S]*?)</\1>" % "|".join(map(re.escape, sorted(names))))
    calls: list[ToolCall] = []
    for found in pattern.finditer(text):
        params = {
            key: value.strip("\n") if key in _VERBATIM else value.strip()
            for key, value in _PARAM.findall(found.group(2))
        }
        arguments = json.dumps(params, ensure_ascii=False)
        calls.append(
            ToolCall(id=f"cline_{n}_{len(calls)}", name=found.group(1), arguments=arguments)
        )
    if not calls:
        return text, []
    rest = pattern.sub("", text).rstrip()
    return (rest or None), calls


def _read_ui(path: Path, task: _Task, parsed: Parsed) -> None:
    """Count the UI rows (skipped), reading timestamps, the model and the usage from them."""
    if not path.is_file():
        return
    start = parsed.records
    try:
        rows = load_json_document(path)
    except InputError as err:
        parsed.records += 1
        parsed.rejects.append(reject(path, start + 1, f"{UI_FILE}: {err}"))
        return
    if not isinstance(rows, list):
        parsed.records += 1
        parsed.rejects.append(reject(path, start + 1, f"{UI_FILE}: expected a JSON array"))
        return
    parsed.records += len(rows)
    usage: Counter[str] = Counter()
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            parsed.rejects.append(
                reject(path, start + i + 1, f"{UI_FILE} row {i}: not an object", row)
            )
            continue
        parsed.skip("ui-partial" if row.get("partial") else "ui-only")
        if isinstance(row.get("ts"), int | float):
            task.times.append(int(row["ts"]))
        info = row.get("modelInfo")
        if isinstance(info, dict) and isinstance(info.get("modelId"), str):
            task.meta.setdefault("fallback_model", info["modelId"])
        if row.get("say") == "api_req_started":
            usage.update(_request_usage(row.get("text")))
    if usage:
        task.meta["usage"] = {k: round(v, 6) if k == "cost_usd" else v for k, v in usage.items()}


def _request_usage(text: Any) -> dict[str, float]:
    """Tokens and cost of an `api_req_started` row (its text is a JSON string)."""
    try:
        info = json.loads(text) if isinstance(text, str) else None
    except json.JSONDecodeError:
        return {}
    if not isinstance(info, dict):
        return {}
    names = {
        "tokensIn": "tokens_in",
        "tokensOut": "tokens_out",
        "cacheWrites": "cache_writes",
        "cacheReads": "cache_reads",
        "cost": "cost_usd",
    }
    return {
        out: info[key]
        for key, out in names.items()
        if isinstance(info.get(key), int | float) and not isinstance(info.get(key), bool)
    }


def _read_metadata(path: Path, task: _Task, parsed: Parsed) -> None:
    """`task_metadata.json` → the Cline version and, for messages without one, the model."""
    if not path.is_file():
        return
    parsed.records += 1
    try:
        data = load_json_document(path)
    except InputError as err:
        parsed.rejects.append(reject(path, parsed.records, f"{METADATA_FILE}: {err}"))
        return
    if not isinstance(data, dict):
        parsed.rejects.append(reject(path, parsed.records, f"{METADATA_FILE}: not an object"))
        return
    usage = [u for u in data.get("model_usage") or [] if isinstance(u, dict)]
    if usage and isinstance(usage[0].get("model_id"), str):
        task.meta["fallback_model"] = usage[0]["model_id"]
    env = [e for e in data.get("environment_history") or [] if isinstance(e, dict)]
    if env and isinstance(env[-1].get("cline_version"), str):
        task.meta["cline_version"] = env[-1]["cline_version"]
    task.lines.append(parsed.records)


def _blocks(content: str | list[Any]) -> list[Any]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _kind(block: Any) -> Any:
    return block.get("type") if isinstance(block, dict) else None


def _result_text(content: Any) -> str:
    if isinstance(content, str | list) or content is None:
        return content_text(content) or ""
    return json.dumps(content, ensure_ascii=False)


def _result_names(msg: Any) -> set[str]:
    """Tool names that the text results of a (user) message name."""
    if not isinstance(msg, dict) or not isinstance(msg.get("content"), str | list):
        return set()
    names = set()
    for block in _blocks(msg["content"]):
        text = block.get("text") if isinstance(block, dict) else None
        found = (RESULT.match(text) or NOT_EXECUTED.match(text)) if isinstance(text, str) else None
        if found:
            names.add(found.group(1))
    return names
