"""Suites: JSONL items with references, a content revision, and deterministic named slices.

    suite = load_suite(Path("examples/arith/suite.jsonl"))
    gate_ids = slice_ids(suite, {"dev": 0.5, "gate": 0.5}, "gate")

One item per line: a unique `id`; `messages` (a chat) or `prompt` (plain text), not both;
reference fields for its scorer (`answer`, `tests`, `choices`, `schema`, …); `scorer` (else the
suite default); optional `tags`. An agent item also offers `tools` and names its `environment`
(checked by `tuneloop.envs.items`); its `messages` may hold earlier turns, including assistant
`tool_calls` (content null) and `tool` results. Every error names the file and line (duplicate
ids name both).

The revision is the sha256 of the canonical JSON (sorted keys, no spaces) of the list of items
in file order, so re-indenting the file or reordering keys keeps it, and any change to any item
(or to the order) changes it. It hashes the items as written: the default scorer is a setting of
the eval, recorded with it, not part of the suite's content.

Slices (the exact rule, so that they can be reproduced elsewhere): each id gets
u = first 8 bytes of sha256(id, UTF-8) as a big-endian integer / 2**64, in [0, 1). Slice names
are sorted; slice k covers [c_{k-1}, c_k) where c_k is the running sum of the fractions in that
order (c_0 = 0). Ids with u beyond the total belong to no slice. Membership depends only on the
id, so editing other items never moves an item between slices. With `stratify_by_tag`, items are
grouped by their first tag (untagged items form one group), sorted by u within each group, and
slice k takes ranks [round(c_{k-1}·n), round(c_k·n)) of the group's n items: exact proportions
per tag, still decided by the id hash alone.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuneloop.errors import InputError, read_utf8
from tuneloop.records import canonical_json
from tuneloop.registry import did_you_mean


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


@dataclass(frozen=True)
class Suite:
    path: Path
    revision: str
    """sha256 of the canonical JSON of the items in order."""
    items: tuple[SuiteItem, ...]

    def by_id(self) -> dict[str, SuiteItem]:
        return {item.id: item for item in self.items}


def load_suite(path: Path, default_scorer: str = "numeric") -> Suite:
    """Read and check a suite JSONL; every error names file:line and what was expected."""
    from tuneloop.registry import scorers

    path = Path(path)
    # JSONL lines end at "\n" only: str.splitlines() would also split inside a JSON string at
    # U+2028, U+0085 and other characters that JSON allows there unescaped
    lines = read_utf8(path, "suite file").split("\n")
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
    if any(key in raw for key in ("tools", "environment", "tool_results", "expected_tools")):
        from tuneloop.envs import check_agent_item

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


# ---- slices ---------------------------------------------------------------------------------


def id_unit(item_id: str) -> float:
    """The id's position in [0, 1): first 8 bytes of sha256(id) / 2**64."""
    digest = hashlib.sha256(item_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _bounds(fractions: dict[str, float], name: str) -> tuple[float, float]:
    if name not in fractions:
        known = ", ".join(sorted(fractions)) or "none"
        raise InputError(
            f"unknown slice {name!r}{did_you_mean(name, fractions)}; configured: {known} "
            "(suite.slices in loop.yaml)"
        )
    bad = {k: v for k, v in fractions.items() if not 0 < v <= 1}
    if bad or sum(fractions.values()) > 1 + 1e-9:
        raise InputError(
            f"suite.slices: fractions must each be in (0, 1] and sum to ≤ 1 (got {fractions})"
        )
    low = 0.0
    for key in sorted(fractions):
        high = low + fractions[key]
        if key == name:
            return low, high
        low = high
    raise AssertionError("unreachable")


def slice_ids(
    suite: Suite, fractions: dict[str, float], name: str, *, stratify_by_tag: bool = False
) -> list[str]:
    """Ids of slice `name`, in suite order; see the module docstring for the exact rule."""
    low, high = _bounds(fractions, name)
    if not stratify_by_tag:
        chosen = {i.id for i in suite.items if low <= id_unit(i.id) < high}
    else:
        groups: dict[str, list[str]] = defaultdict(list)
        for item in suite.items:
            groups[item.tags[0] if item.tags else ""].append(item.id)
        chosen = set()
        for ids in groups.values():
            ranked = sorted(ids, key=lambda i: (id_unit(i), i))
            n = len(ranked)
            chosen.update(ranked[round(low * n) : round(high * n)])
    return [i.id for i in suite.items if i.id in chosen]


# ---- prompt text (hygiene, dedup) -------------------------------------------------------------


def normalize_prompt(text: str) -> str:
    """Lower-case and collapse runs of whitespace to one space (for dedup/contamination keys)."""
    return " ".join(text.lower().split())


def item_prompt_text(item: SuiteItem | dict[str, Any]) -> str:
    """What the user sees: the `prompt`, or the user turns' contents joined by newlines."""
    if isinstance(item, SuiteItem):
        prompt, messages = item.prompt, item.messages
    else:
        prompt, messages = item.get("prompt"), item.get("messages")
    if isinstance(prompt, str):
        return prompt
    return "\n".join(
        str(m.get("content", ""))
        for m in messages or []
        if isinstance(m, dict) and m.get("role") == "user"
    )


def parse_slice_fractions(text: str, option: str = "--slices") -> dict[str, float]:
    """`dev=0.5,gate=0.5` → {"dev": 0.5, "gate": 0.5}; errors name the command-line option."""
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        name = name.strip()
        try:
            fraction = float(value)
        except ValueError:
            sep = ""
        if not sep or not name:
            raise InputError(f"{option}: expected NAME=FRACTION[,NAME=FRACTION…] (got {part!r})")
        if name in out:
            raise InputError(f"{option}: slice {name!r} is given twice")
        if not 0 < fraction <= 1:  # also refuses nan
            raise InputError(f"{option}: the fraction of slice {name!r} must lie in (0, 1]")
        out[name] = fraction
    return out
