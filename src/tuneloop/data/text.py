"""Text keys shared by dedup, decontamination and bands: normalization and tokens.

`normalize_text` is NFKC, lower case, whitespace collapsed. `tokens` splits normalized text
into words/numbers and single punctuation marks: punctuation is kept as tokens on purpose,
because for arithmetic prompts the operator *is* the content ("37 + 45" and "37 - 45" must not
collide), unlike the GPT-3 decontamination tokenizer, which drops it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import Any

_TOKEN = re.compile(r"\w+|[^\w\s]")
_SPACE = re.compile(r"\s+")


def normalize_text(text: str) -> str:
    """NFKC, lower case, NUL and runs of whitespace → one space, stripped.

    NUL counts as whitespace: it is not text, and the vectorized tokenizer
    (`decontam.fasttok`) uses it as its separator between texts.
    """
    text = unicodedata.normalize("NFKC", text.replace("\x00", " ")).lower()
    return _SPACE.sub(" ", text).strip()


def tokens(text: str) -> list[str]:
    """Word/number tokens and single punctuation marks of the normalized text."""
    return _TOKEN.findall(normalize_text(text))


def message_text(msg: dict[str, Any]) -> str:
    """All text of one chat message: content, reasoning and tool-call arguments."""
    parts = [msg.get("content") or "", msg.get("reasoning") or ""]
    for call in msg.get("tool_calls") or []:
        fn = call.get("function", call)
        parts.append(f"{fn.get('name', '')} {fn.get('arguments', '')}")
    return "\n".join(p for p in parts if p)


def prompt_text(messages: Iterable[dict[str, Any]]) -> str:
    """The prompt of a conversation: its user messages joined by newlines — the same rule as
    `tuneloop.suite.item_prompt_text`, so a row and a suite item compare like with like."""
    return "\n".join(m.get("content") or "" for m in messages if m.get("role") == "user")


def conversation_text(messages: Iterable[dict[str, Any]]) -> str:
    """All text of a conversation (every message's `message_text`), joined by newlines."""
    return "\n".join(message_text(m) for m in messages)


def normalized_prompt(messages: Iterable[dict[str, Any]]) -> str:
    """The dedup / exact-match key text: the normalized prompt (tokens joined by spaces)."""
    return " ".join(tokens(prompt_text(messages)))
