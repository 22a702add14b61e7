from __future__ import annotations

from pathlib import Path

import pytest
from conftest import write_jsonl

from tuneloop.errors import InputError
from tuneloop.train.data import read_rows
from tuneloop.train.hygiene import check_contamination, suite_index


def _files(tmp_path: Path) -> tuple[Path, Path]:
    suite = write_jsonl(
        tmp_path / "suite.jsonl",
        [
            {
                "id": "add-7",
                "messages": [{"role": "user", "content": "What is 3 + 4?"}],
                "answer": "7",
            },
            {"id": "add-9", "prompt": "What is 4 + 5?", "answer": "9"},
        ],
    )
    train = write_jsonl(
        tmp_path / "train.jsonl",
        [
            {"messages": [{"role": "user", "content": "What is 1 + 1?"}], "answer": "2"},
            {"messages": [{"role": "user", "content": "what  is 3 +\n4?"}], "answer": "7"},
        ],
    )
    return suite, train


def test_index_keys_are_the_suites_normalized_prompts(tmp_path: Path) -> None:
    suite, _ = _files(tmp_path)
    assert suite_index([suite]) == {"what is 3 + 4?": "add-7", "what is 4 + 5?": "add-9"}


def test_contamination_is_refused_naming_line_and_item(tmp_path: Path) -> None:
    suite, train = _files(tmp_path)
    with pytest.raises(InputError, match=r"train\.jsonl:2 ~ add-7"):
        check_contamination(read_rows(train), [suite], allow=False)


def test_contamination_allowed_is_returned_for_the_record(tmp_path: Path) -> None:
    suite, train = _files(tmp_path)
    hits = check_contamination(read_rows(train), [suite], allow=True)
    assert hits == [f"{train}:2 ~ add-7"]


def test_clean_data_passes(tmp_path: Path) -> None:
    suite, _ = _files(tmp_path)
    clean = write_jsonl(tmp_path / "c.jsonl", [{"prompt": "What is 8 + 8?", "answer": "16"}])
    assert check_contamination(read_rows(clean), [suite], allow=False) == []
