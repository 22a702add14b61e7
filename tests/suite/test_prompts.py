"""An item's prompt text and its normalization (dedup and contamination keys)."""

from __future__ import annotations

from tuneloop.suite import SuiteItem, item_prompt_text, normalize_prompt


def test_prompt_text_and_normalization() -> None:
    item = SuiteItem(
        "a",
        [
            {"role": "system", "content": "S"},
            {"role": "user", "content": "Hi"},
            {"role": "user", "content": "There"},
        ],
        None,
        "exact",
        (),
        {},
    )
    assert item_prompt_text(item) == "Hi\nThere"
    assert item_prompt_text({"prompt": "P"}) == "P"
    assert normalize_prompt("  What  IS\n2 + 2? ") == "what is 2 + 2?"
