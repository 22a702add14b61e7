from __future__ import annotations

from pathlib import Path

import pytest
from conftest import write_jsonl

from tuneloop.errors import InputError
from tuneloop.train.data import dpo_rows, grpo_rows, read_rows, sft_rows, user_text


def test_sft_on_references_builds_the_assistant_turn(prompts: Path) -> None:
    rows = sft_rows(read_rows(prompts))
    assert rows[0]["messages"][-1] == {"role": "assistant", "content": "0"}
    assert rows[0]["messages"][0]["role"] == "user"


def test_sft_keeps_chat_rows_with_tool_calls(tmp_path: Path) -> None:
    msgs = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"type": "function", "function": {"name": "w", "arguments": "{}"}}],
        },
        {"role": "tool", "content": "sunny"},
        {"role": "assistant", "content": "Sunny."},
    ]
    rows = sft_rows(read_rows(write_jsonl(tmp_path / "c.jsonl", [{"messages": msgs}])))
    assert rows == [{"messages": msgs}]


def test_grpo_rows_carry_the_item_for_the_scorer(prompts: Path) -> None:
    row = grpo_rows(read_rows(prompts))[3]
    assert row["prompt"][-1]["role"] == "user"
    assert '"answer": "4"' in row["item"]


def test_grpo_needs_a_reference_and_names_the_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [{"prompt": "hi", "answer": "1"}, {"prompt": "x"}])
    with pytest.raises(InputError, match=r"p\.jsonl:2: GRPO needs a reference"):
        grpo_rows(read_rows(path))


def test_dpo_rows_and_errors(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "1+1?", "chosen": "2", "rejected": "3"}])
    row = dpo_rows(read_rows(path))[0]
    assert row["chosen"] == [{"role": "assistant", "content": "2"}]
    bad = write_jsonl(tmp_path / "e.jsonl", [{"prompt": "1+1?", "chosen": "2"}])
    with pytest.raises(InputError, match=r"e\.jsonl:1: DPO row lacks rejected"):
        dpo_rows(read_rows(bad))


def test_missing_file_names_the_producer(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="tuneloop corpus build"):
        read_rows(tmp_path / "none.jsonl")


def test_user_text_joins_user_turns() -> None:
    item = {
        "messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "a"},
            {"role": "user", "content": "b"},
        ]
    }
    assert user_text(item) == "a\nb"
    assert user_text({"prompt": "p"}) == "p"
