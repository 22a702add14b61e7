"""Reading a suite: JSONL items with references, checked line by line, and its revision.

    suite = load_suite(Path("examples/arith/suite.jsonl"))

One item per line: a unique `id`; `messages` (a chat) or `prompt` (plain text), not both;
reference fields for its scorer (`answer`, `tests`, `choices`, `schema`, …); `scorer` (else the
suite default); optional `tags`. An agent item also offers `tools` and names its `environment`
(checked by `tuneloop.suite.agent`); its `messages` may hold earlier turns, including assistant
`tool_calls` (content null) and `tool` results. Every error names the file and line (duplicate
ids name both).

The revision is the sha256 of the canonical JSON (sorted keys, no spaces) of the list of items
in file order, so re-indenting the file or reordering keys keeps it, and any change to any item
(or to the order) changes it. It hashes the items as written: the default scorer is a setting of
the eval, recorded with it, not part of the suite's content.

An item's content hash (`SuiteItem.content_sha256`) is what the one-look rule keys a look to,
beside its id: the sha256 of the canonical JSON of the item without `id` and `tags`, with its
effective `scorer` — prompt or messages, reference fields, scorer arguments, tools and
environment: everything that changes what is judged. Re-tagging an item keeps it; a one
character change to its answer does not (`tuneloop.gate.looks`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuneloop.errors import InputError, did_you_mean, read_utf8
from tuneloop.records import canonical_json
from tuneloop.registry import scorers
from tuneloop.suite.agent import AGENT_FIELDS, check_agent_item


@dataclass(frozen=True)
class SuiteItem:
    id: str
    messages: list[dict] | None
    """The chat to send (`/v1/chat/completions`), or None for a `prompt` item."""
    prompt: str | None
    """Plain text to complete (`/v1/completions`), or None for a chat item."""
    scorer: str
    """Registered scorer name (the item's own or the suite default)."""
    tags: tuple[str, ...]
    raw: dict
    """The whole JSON object: the reference fields the scorer reads."""

    @property
    def content_sha256(self) -> str:
        """sha256 of what is judged: the item without `id` and `tags`, with its scorer."""
        return item_content_sha256(self.raw, self.scorer)


@dataclass(frozen=True)
class Suite:
    path: Path
    revision: str
    """sha256 of the canonical JSON of the items in order."""
    items: tuple[SuiteItem, ...]

    def by_id(self) -> dict[str, SuiteItem]:
        return {item.id: item for item in self.items}


NOT_CONTENT = ("id", "tags")
"""Fields that name or group an item without changing what is judged."""


def item_content_sha256(raw: dict[str, Any], scorer: str) -> str:
    """The content hash of an item's JSON object judged by `scorer` (module docstring)."""
    content = {k: v for k, v in raw.items() if k not in NOT_CONTENT}
    content["scorer"] = scorer
    return hashlib.sha256(canonical_json(content).encode("utf-8")).hexdigest()


def load_suite(path: Path, default_scorer: str = "numeric") -> Suite:
    """Read and check a suite JSONL; every error names file:line and what was expected."""
    path = Path(path)
    # JSONL lines end at "\n" only: str.splitlines() would also split inside a JSON string at
    # U+2028, U+0085 and other characters that JSON allows there unescaped. A byte-order mark
    # (editors on Windows write one) is not part of the first item: dropped, as JSON readers do
    lines = read_utf8(path, "suite file").removeprefix("\ufeff").split("\n")
    items: list[SuiteItem] = []
    raws: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        raw = _parse_line(line, where)
        item = _parse_item(raw, where, default_scorer)
        if item.id in seen:
            raise InputError(f"{where}: duplicate id {item.id!r} (first at line {seen[item.id]})")
        if item.scorer not in scorers:
            raise InputError(
                f"{where}: unknown scorer {item.scorer!r}"
                f"{did_you_mean(item.scorer, scorers.names())}; "
                f"known: {', '.join(scorers.names())}"
            )
        seen[item.id] = lineno
        items.append(item)
        raws.append(raw)
    if not items:
        raise InputError(f"{path}: the suite has no items (expected one JSON object per line)")
    revision = hashlib.sha256(canonical_json(raws).encode("utf-8")).hexdigest()
    return Suite(path=path, revision=revision, items=tuple(items))


def _parse_line(line: str, where: str) -> dict[str, Any]:
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as err:
        raise InputError(f"{where}: invalid JSON: {err.msg} (column {err.colno})") from None
    if not isinstance(raw, dict):
        raise InputError(f"{where}: expected a JSON object with 'id' and 'messages' or 'prompt'")
    return raw


def _parse_item(raw: dict[str, Any], where: str, default_scorer: str) -> SuiteItem:
    item_id = raw.get("id")
    if not isinstance(item_id, str) or not item_id:
        raise InputError(f"{where}: 'id' must be a non-empty string (got {item_id!r})")
    messages, prompt = raw.get("messages"), raw.get("prompt")
    if (messages is None) == (prompt is None):
        raise InputError(f"{where}: item {item_id!r} needs exactly one of 'messages' or 'prompt'")
    if messages is not None and not _valid_messages(messages):
        raise InputError(
            f"{where}: 'messages' must be a non-empty list of {{'role', 'content'}} objects "
            "with string values (an assistant turn with 'tool_calls' may have null content)"
        )
    if prompt is not None and not isinstance(prompt, str):
        raise InputError(f"{where}: 'prompt' must be a string")
    scorer = raw.get("scorer", default_scorer)
    if not isinstance(scorer, str):
        raise InputError(f"{where}: 'scorer' must be a string naming a registered scorer")
    tags = raw.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise InputError(f"{where}: 'tags' must be a list of strings")
    if any(key in raw for key in AGENT_FIELDS):
        check_agent_item(raw, where)
    return SuiteItem(item_id, messages, prompt, scorer, tuple(tags), raw)


def _valid_messages(messages: Any) -> bool:
    return (
        isinstance(messages, list)
        and bool(messages)
        and all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages)
        and all(
            isinstance(m.get("content"), str)
            or (m["role"] == "assistant" and m.get("content") is None and m.get("tool_calls"))
            for m in messages
        )
    )
