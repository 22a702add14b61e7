"""Training data: read and validate JSONL rows for each method, before any model is loaded.

Accepted shapes (one JSON object per line):

- prompt rows (GRPO; SFT "on references"): `{"id", "messages": [...user turns...] or "prompt",
  "answer" (or another reference field), "scorer"?, "tags"?}` — the suite item shape.
- chat rows (SFT): `{"messages": [...]}` with at least one assistant turn; tool calls allowed,
  with the offered `tools` (names of registered tools or OpenAI function entries) beside them.
- preference rows (DPO): `{"prompt", "chosen", "rejected"}`, each a string or a message list.

SFT on a prompt file builds the assistant turn from the reference `answer` ("SFT on
references"). Every problem is reported with its file:line and what was expected.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuneloop.envs import item_tools
from tuneloop.errors import InputError
from tuneloop.records import iter_jsonl

REFERENCE_FIELDS = ("answer", "target", "tests", "choices")


@dataclass(frozen=True)
class Row:
    """One training row with where it came from."""

    where: str
    """`file:line`."""
    data: dict[str, Any]


def read_rows(path: Path) -> list[Row]:
    """All rows of a JSONL file; InputError naming the file when missing or empty."""
    path = Path(path)
    if not path.is_file():
        raise InputError(
            f"{path}: training data not found (expected a JSONL file; "
            "`tuneloop corpus build` produces one from traces)"
        )
    rows = [Row(f"{path}:{n}", obj) for n, obj in iter_jsonl(path)]
    if not rows:
        raise InputError(f"{path}: no rows (expected one JSON object per line)")
    return rows


def prompt_messages(obj: dict[str, Any], where: str) -> list[dict[str, Any]]:
    """The prompt as chat messages (from `messages` or a plain `prompt` string)."""
    msgs = obj.get("messages")
    if isinstance(msgs, list) and msgs:
        _check_messages(msgs, where)
        return msgs
    prompt = obj.get("prompt")
    if isinstance(prompt, str) and prompt:
        return [{"role": "user", "content": prompt}]
    if isinstance(prompt, list) and prompt:
        _check_messages(prompt, where)
        return prompt
    raise InputError(f"{where}: expected 'messages' (a non-empty list) or 'prompt' (a string)")


def user_text(obj: dict[str, Any]) -> str:
    """The user-visible prompt text (user turns joined), for contamination checks."""
    msgs = obj.get("messages")
    if not isinstance(msgs, list):
        msgs = obj.get("prompt")
    if isinstance(msgs, str):
        return msgs
    if not isinstance(msgs, list):
        return ""
    return "\n".join(
        str(m.get("content") or "") for m in msgs if isinstance(m, dict) and m.get("role") == "user"
    )


def _check_messages(msgs: list[Any], where: str) -> None:
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise InputError(f"{where}: messages[{i}] must be an object with a 'role'")
        if m.get("content") is None and not m.get("tool_calls"):
            raise InputError(f"{where}: messages[{i}] has neither 'content' nor 'tool_calls'")


def grpo_rows(rows: list[Row]) -> list[dict[str, Any]]:
    """GRPO dataset rows: `prompt` (messages) and `item` (the row as JSON, for the scorer)."""
    out = []
    for row in rows:
        prompt = prompt_messages(row.data, row.where)
        if not any(k in row.data for k in REFERENCE_FIELDS):
            raise InputError(
                f"{row.where}: GRPO needs a reference to score against "
                f"(one of {', '.join(REFERENCE_FIELDS)})"
            )
        if prompt[-1].get("role") == "assistant":
            raise InputError(f"{row.where}: the prompt must not end with an assistant turn")
        out.append({"prompt": prompt, "item": json.dumps(row.data, ensure_ascii=False)})
    return out


def sft_rows(rows: list[Row]) -> list[dict[str, Any]]:
    """SFT conversations: chat rows as they are (with their `tools`, if any, as OpenAI
    entries); prompt rows with the reference as reply."""
    out = []
    for row in rows:
        msgs = row.data.get("messages")
        has_reply = isinstance(msgs, list) and any(
            isinstance(m, dict) and m.get("role") == "assistant" for m in msgs
        )
        if has_reply:
            _check_messages(msgs, row.where)  # type: ignore[arg-type]
            out.append(_with_tools({"messages": msgs}, row.data))
            continue
        answer = row.data.get("answer")
        if answer is None:
            raise InputError(
                f"{row.where}: SFT needs a conversation with an assistant turn, or a prompt "
                "with an 'answer' to train on (SFT on references)"
            )
        prompt = prompt_messages(row.data, row.where)
        reply = {"role": "assistant", "content": str(answer)}
        out.append(_with_tools({"messages": [*prompt, reply]}, row.data))
    return out


def _with_tools(conversation: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    """The conversation with the row's `tools` as OpenAI entries, when it offers any."""
    tools = item_tools(data)
    return {**conversation, "tools": tools} if tools else conversation


def dpo_rows(rows: list[Row]) -> list[dict[str, Any]]:
    """DPO rows in TRL's conversational preference shape (prompt, chosen, rejected)."""
    out = []
    for row in rows:
        missing = [k for k in ("prompt", "chosen", "rejected") if k not in row.data]
        if missing:
            raise InputError(f"{row.where}: DPO row lacks {', '.join(missing)}")
        prompt = prompt_messages({"prompt": row.data["prompt"]}, row.where)
        pair = {}
        for key in ("chosen", "rejected"):
            value = row.data[key]
            if isinstance(value, str):
                value = [{"role": "assistant", "content": value}]
            if not isinstance(value, list) or not value:
                raise InputError(f"{row.where}: {key!r} must be a string or a message list")
            _check_messages(value, row.where)
            pair[key] = value
        out.append({"prompt": prompt, **pair})
    return out
