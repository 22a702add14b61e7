"""Suite loading: fields, errors naming file and line, and the revision."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from tuneloop.errors import InputError
from tuneloop.suite import load_suite

from ..installed import tuneloop


def write(path: Path, rows: Sequence[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def chat(i: int, **extra: object) -> dict[str, object]:
    return {
        "id": f"q{i}",
        "messages": [{"role": "user", "content": f"Q {i}?"}],
        "answer": "1",
        **extra,
    }


def test_load_fields_and_defaults(tmp_path: Path) -> None:
    path = write(
        tmp_path / "s.jsonl",
        [
            chat(1, tags=["a"]),
            {"id": "p", "prompt": "2+2=", "answer": "4", "scorer": "exact"},
            "",
        ],
    )
    suite = load_suite(path, default_scorer="numeric")
    first, second = suite.items
    assert (first.scorer, first.tags, first.prompt) == ("numeric", ("a",), None)
    assert (second.scorer, second.messages, second.raw["answer"]) == ("exact", None, "4")
    assert len(suite.revision) == 64


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([chat(1), chat(1)], r"s.jsonl:2: duplicate id 'q1' \(first at line 1\)"),
        ([chat(1), "{oops"], r"s.jsonl:2: invalid JSON"),
        ([[1, 2]], r"s.jsonl:1: expected a JSON object"),
        ([{"id": 3, "prompt": "x"}], r"s.jsonl:1: 'id' must be a non-empty string"),
        ([{"id": "a"}], r"s.jsonl:1: item 'a' needs exactly one of 'messages' or 'prompt'"),
        ([{"id": "a", "prompt": "x", "messages": []}], "exactly one"),
        ([{"id": "a", "messages": [{"role": "user"}]}], r"s.jsonl:1: 'messages' must be"),
        ([chat(1, scorer="numric")], r"s.jsonl:1: unknown scorer 'numric' \(did you mean"),
        ([chat(1, tags="x")], r"s.jsonl:1: 'tags' must be a list of strings"),
        ([], r"the suite has no items"),
    ],
)
def test_errors_name_file_and_line(tmp_path: Path, rows: list[object], message: str) -> None:
    with pytest.raises(InputError, match=message):
        load_suite(write(tmp_path / "s.jsonl", rows))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="suite file not found"):
        load_suite(tmp_path / "nope.jsonl")


def test_a_folder_is_not_a_suite(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is a folder, expected a suite file"):
        load_suite(tmp_path)


def test_a_non_utf8_byte_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(json.dumps(chat(1)).encode() + b'\n{"id": "caf\xe9"}\n')
    with pytest.raises(InputError, match=r"s.jsonl:2: not UTF-8 text \(byte 0xe9 at column 12\)"):
        load_suite(path)


def test_line_separators_inside_json_strings_stay_in_their_line(tmp_path: Path) -> None:
    # JSON allows U+2028 and U+0085 unescaped inside strings; str.splitlines() cuts there
    prompt = "a\u2028b\u0085c"
    line = json.dumps({"id": "p", "prompt": prompt}, ensure_ascii=False)
    path = write(tmp_path / "s.jsonl", [line, "{oops"])
    with pytest.raises(InputError, match=r"s.jsonl:2: invalid JSON"):
        load_suite(path)
    path.write_text(line + "\r\n")
    assert load_suite(path).items[0].prompt == prompt


def test_revision_ignores_formatting_but_not_content(tmp_path: Path) -> None:
    rows = [chat(1), chat(2)]
    base = load_suite(write(tmp_path / "a.jsonl", rows)).revision
    pretty = tmp_path / "b.jsonl"
    pretty.write_text(
        "\n".join(
            json.dumps(dict(reversed(list(r.items()))), indent=None, separators=(" , ", " : "))
            for r in rows
        )
        + "\n\n"
    )
    assert load_suite(pretty).revision == base
    assert load_suite(write(tmp_path / "c.jsonl", [chat(2), chat(1)])).revision != base
    assert load_suite(write(tmp_path / "d.jsonl", [chat(1), chat(2, answer="2")])).revision != base


def _hash(tmp_path: Path, row: dict[str, object], default_scorer: str = "numeric") -> str:
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(row) + "\n")
    return load_suite(path, default_scorer).items[0].content_sha256


def test_the_content_hash_covers_what_is_judged_and_not_tags(tmp_path: Path) -> None:
    base = {"id": "a", "prompt": "1+1=", "answer": "2", "tags": ["x"]}
    sha = _hash(tmp_path, base)
    assert _hash(tmp_path, {**base, "tags": ["y", "z"]}) == sha  # tags: not content
    assert _hash(tmp_path, {**base, "id": "b"}) == sha  # the id is the key, not content
    assert _hash(tmp_path, {"tags": ["x"], "answer": "2", "prompt": "1+1=", "id": "a"}) == sha
    for changed in (
        {**base, "answer": "20"},
        {**base, "prompt": "1+1 ="},
        {**base, "scorer": "exact"},
        {**base, "scorer_args": {"tolerance": 0.1}},
    ):
        assert _hash(tmp_path, changed) != sha, changed
    # the effective scorer is content: a new default scorer changes what is judged
    assert _hash(tmp_path, base, default_scorer="exact") != sha
    assert _hash(tmp_path, {**base, "scorer": "numeric"}) == sha


def test_a_byte_order_mark_is_not_part_of_the_first_item(tmp_path: Path) -> None:
    """A suite saved by a Windows editor starts with a UTF-8 BOM: it was refused with Python's
    advice ("decode using utf-8-sig"); the items and revision are the file's without it."""
    plain = tmp_path / "plain.jsonl"
    plain.write_text('{"id": "a", "prompt": "1 + 1?", "answer": "2"}\n')
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    assert load_suite(bom).revision == load_suite(plain).revision
    missing = tmp_path / "ledger.db"
    ran = tuneloop("ledger", "renew", missing, "--suite", bom, "--item", "a", "--reason", "x")
    ran.assert_input_error(str(missing), "no ledger here")  # the suite was read
    assert "utf-8-sig" not in ran.output and not missing.exists()
