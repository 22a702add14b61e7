"""Ingester `generic_jsonl`: any JSONL of conversations, mapped by field names.

Run: `tuneloop ingest --format generic_jsonl logs.jsonl --opt messages=conversations
--opt role_key=from --opt content_key=value --out traces.jsonl` (ShareGPT), or
`--opt prompt=input --opt completion=output --opt feedback=label` (single-turn pairs).

Options (all field paths are dotted, `a.b.0.c`):
- `messages` — the list of chat messages (default `messages`); `role_key` / `content_key`
  name the role and text keys inside each (default `role` / `content`). Roles are mapped
  leniently (human → user, gpt / bot / model → assistant, developer → system);
- or `prompt` + `completion` — one user turn and one assistant reply; `system` adds a system
  message before them;
- `id`, `model`, `timestamp`, `feedback` — where to read those (feedback goes through
  `normalize_feedback`); an unset `id` gives `<file stem>:<line>`.
A line missing a configured field is rejected as `malformed`, naming the field.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tuneloop.data.ingest.base import Converter, Lines, Reject, check_options, excerpt
from tuneloop.data.ingest.chat import BadMessage, content_text, iso_time, to_messages
from tuneloop.data.ingest.feedback import normalize_feedback
from tuneloop.errors import InputError
from tuneloop.records.trace import Message, Trace
from tuneloop.registry import ingesters

OPTIONS = {
    "messages",
    "role_key",
    "content_key",
    "prompt",
    "completion",
    "system",
    "id",
    "model",
    "timestamp",
    "feedback",
}
_MISSING = object()


def get_path(obj: Any, path: str) -> Any:
    """Value at a dotted path (`a.b.0.c`), or a sentinel when any step is missing."""
    for part in path.split("."):
        if isinstance(obj, dict) and part in obj:
            obj = obj[part]
        elif isinstance(obj, list) and part.isdigit() and int(part) < len(obj):
            obj = obj[int(part)]
        else:
            return _MISSING
    return obj


def _required(obj: dict[str, Any], path: str) -> Any:
    value = get_path(obj, path)
    if value is _MISSING:
        raise BadMessage(f"missing field {path!r}")
    return value


def _optional(obj: dict[str, Any], path: str | None) -> Any:
    if not path:
        return None
    value = get_path(obj, path)
    return None if value is _MISSING else value


def _messages(obj: dict[str, Any], opts: dict[str, Any]) -> list[Message]:
    if opts.get("prompt"):
        out = []
        system = _optional(obj, opts.get("system"))
        if system:
            out.append(Message(role="system", content=content_text(system)))
        out.append(Message(role="user", content=content_text(_required(obj, opts["prompt"]))))
        out.append(
            Message(role="assistant", content=content_text(_required(obj, opts["completion"])))
        )
        return out
    raw = _required(obj, opts.get("messages", "messages"))
    return to_messages(
        raw, role_key=opts.get("role_key", "role"), content_key=opts.get("content_key", "content")
    )


@ingesters.register("generic_jsonl")
def generic_jsonl(**options: Any) -> Converter:
    """Any JSONL of conversations, with field names given as options."""
    check_options("generic_jsonl", options, OPTIONS)
    if bool(options.get("prompt")) != bool(options.get("completion")):
        raise InputError("ingester 'generic_jsonl': options prompt and completion go together")

    def convert(file: str, lines: Lines) -> Iterator[Trace | Reject]:
        for lineno, obj in lines:
            try:
                rid = _optional(obj, options.get("id"))
                model = _optional(obj, options.get("model"))
                yield Trace(
                    source="generic_jsonl",
                    source_id=str(rid) if rid is not None else f"{Path(file).stem}:{lineno}",
                    source_file=file,
                    source_lines=[lineno],
                    messages=_messages(obj, options),
                    model=model if isinstance(model, str) else None,
                    started_at=iso_time(_optional(obj, options.get("timestamp"))),
                    feedback=normalize_feedback(_optional(obj, options.get("feedback"))),
                )
            except (BadMessage, ValidationError) as err:
                reason = str(err).splitlines()[0]
                yield Reject(file, lineno, f"bad record — {reason}", excerpt=excerpt(obj))

    return convert
