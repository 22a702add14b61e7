"""How long a round's sequences get, in the base's own tokens: what the memory check sizes.

The longest training row (SFT: the whole conversation; DPO: the prompt with its longer reply;
GRPO and composite: the prompt) and the longest suite prompt are rendered through the chat
template as training and serving render them, and counted by the base's tokenizer
(`train/checkpoint/compat/`: `tokenizers` and Jinja, no torch). Only the `SAMPLE` longest
by characters are rendered, which keeps `check` at a second on a large file: the longest in
characters is the longest in tokens up to a few tokens of template. Offered tools count as
their JSON. A plain `prompt` item (completion mode) counts its UTF-8 bytes when there is no
template to render with: an upper bound for the byte-level BPE tokenizers of the families
tuneloop runs (every token covers at least one byte).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuneloop.envs import item_tools
from tuneloop.errors import InputError
from tuneloop.suite import Suite
from tuneloop.train.checkpoint.compat import TemplateTokens

SAMPLE = 16
"""Rows (or items) rendered and counted: the longest by characters."""


@dataclass(frozen=True)
class Conversation:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    generation_prompt: bool
    """Rendered up to the assistant's turn (a prompt), or whole (a training conversation)."""

    @property
    def characters(self) -> int:
        text = sum(len(str(m.get("content") or "")) for m in self.messages)
        return text + (len(json.dumps(self.tools)) if self.tools else 0)


def training_conversations(method: str, data: Path) -> list[Conversation]:
    """The rows of `data` as the built-in `method` renders them; [] when it cannot say (a
    plugin method, rows training would refuse: the rows check reports those)."""
    from tuneloop.train.data import dpo_rows, grpo_rows, read_rows, sft_rows

    try:
        rows = read_rows(data)
        if method == "sft":
            return [
                Conversation(r["messages"], r.get("tools") or [], False) for r in sft_rows(rows)
            ]
        if method == "dpo":
            return [
                Conversation([*r["prompt"], *r[reply]], [], False)
                for r in dpo_rows(rows)
                for reply in ("chosen", "rejected")
            ]
        if method in ("grpo", "composite"):
            prompts = [r["prompt"] for r in grpo_rows(rows)]
            return [
                Conversation(p, item_tools(row.data), True)
                for p, row in zip(prompts, rows, strict=True)
            ]
    except InputError:
        pass
    return []


def suite_conversations(suite: Suite) -> tuple[list[Conversation], list[str]]:
    """(chat items as conversations, plain prompt texts)."""
    chats = [
        Conversation(item.messages, item_tools(item.raw), True)
        for item in suite.items
        if item.messages
    ]
    return chats, [item.prompt for item in suite.items if item.prompt]


def longest(
    conversations: Sequence[Conversation], tokens: TemplateTokens | None, texts: Sequence[str] = ()
) -> int | None:
    """The most tokens any of `conversations` (rendered) or `texts` takes; None when the base
    has no template and tokenizer.json to count with (`compat.template_tokens`), or there is
    nothing to count."""
    if tokens is None or tokens.tokenizer is None:
        return max((len(t.encode()) for t in texts), default=None)
    counts = [
        len(tokens.tokenizer.encode(t, add_special_tokens=False).ids)
        for t in sorted(texts, key=len)[-SAMPLE:]
    ]
    for c in sorted(conversations, key=lambda c: c.characters)[-SAMPLE:]:
        try:
            text = tokens.render(c.messages, generation_prompt=c.generation_prompt)
        except Exception:  # noqa: BLE001 - the model check reports what cannot render
            continue
        text += json.dumps(c.tools) if c.tools else ""
        counts.append(len(tokens.tokenizer.encode(text, add_special_tokens=False).ids))
    return max(counts, default=None)
