"""An item's prompt as text: what the user sees, normalized for dedup and contamination keys."""

from __future__ import annotations

from typing import Any

from tuneloop.suite.reader import SuiteItem


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
