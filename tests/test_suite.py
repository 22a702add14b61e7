"""Suite loading, revision, slices and prompt text."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tuneloop.errors import InputError
from tuneloop.suite import (
    Suite,
    SuiteItem,
    id_unit,
    item_prompt_text,
    load_suite,
    normalize_prompt,
    parse_slice_fractions,
    slice_ids,
)


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


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("dev=x", "expected NAME=FRACTION"),
        ("dev", "expected NAME=FRACTION"),
        ("=0.5", "expected NAME=FRACTION"),
        ("dev=nan", r"the fraction of slice 'dev' must lie in \(0, 1\]"),
        ("dev=0", r"the fraction of slice 'dev' must lie in \(0, 1\]"),
        ("dev=1.5", r"the fraction of slice 'dev' must lie in \(0, 1\]"),
        ("dev=0.2,dev=0.3", "slice 'dev' is given twice"),
    ],
)
def test_slice_fractions_from_the_command_line(text: str, message: str) -> None:
    assert parse_slice_fractions(" dev = 0.5, gate=0.5 ") == {"dev": 0.5, "gate": 0.5}
    with pytest.raises(InputError, match=f"--slices: {message}"):
        parse_slice_fractions(text)


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


def _suite(tmp_path: Path, n: int = 400) -> object:
    rows = [chat(i, tags=["x" if i % 4 == 0 else "y"]) for i in range(n)]
    return load_suite(write(tmp_path / "s.jsonl", rows))


def test_slices_are_disjoint_deterministic_and_sized(tmp_path: Path) -> None:
    suite = _suite(tmp_path)
    fractions = {"gate": 0.3, "dev": 0.5}
    dev = slice_ids(suite, fractions, "dev")  # type: ignore[arg-type]
    gate = slice_ids(suite, fractions, "gate")  # type: ignore[arg-type]
    assert not set(dev) & set(gate)
    assert 160 < len(dev) < 240 and 80 < len(gate) < 160
    # the documented rule: sorted names, cumulative bounds ("dev" first: [0, 0.5))
    assert all(id_unit(i) < 0.5 for i in dev) and all(0.5 <= id_unit(i) < 0.8 for i in gate)
    assert slice_ids(suite, fractions, "dev") == dev  # type: ignore[arg-type]


def test_slice_membership_depends_only_on_the_id(tmp_path: Path) -> None:
    suite = _suite(tmp_path)
    smaller = load_suite(write(tmp_path / "t.jsonl", [chat(i) for i in range(0, 400, 2)]))
    dev = set(slice_ids(suite, {"dev": 0.5}, "dev"))  # type: ignore[arg-type]
    assert set(slice_ids(smaller, {"dev": 0.5}, "dev")) == {i.id for i in smaller.items} & dev


def test_stratified_slices_have_exact_proportions(tmp_path: Path) -> None:
    suite = _suite(tmp_path)
    ids = slice_ids(suite, {"dev": 0.5, "gate": 0.5}, "gate", stratify_by_tag=True)  # type: ignore[arg-type]
    tags = {i.id: i.tags[0] for i in suite.items}  # type: ignore[attr-defined]
    assert sum(tags[i] == "x" for i in ids) == 50 and sum(tags[i] == "y" for i in ids) == 150


def test_slice_errors(tmp_path: Path) -> None:
    suite = _suite(tmp_path, 10)
    with pytest.raises(InputError, match=r"unknown slice 'gat' \(did you mean 'gate'\?\)"):
        slice_ids(suite, {"dev": 0.5, "gate": 0.5}, "gat")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="sum to ≤ 1"):
        slice_ids(suite, {"dev": 0.7, "gate": 0.5}, "dev")  # type: ignore[arg-type]


_MANY = Suite(
    Path("x"), "r", tuple(SuiteItem(f"item-{i}", None, "p", "exact", (), {}) for i in range(300))
)


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.sampled_from("abcde"), st.floats(0.01, 0.2), min_size=1))
def test_slices_partition_property(fractions: dict[str, float]) -> None:
    seen: set[str] = set()
    for name in fractions:
        members = set(slice_ids(_MANY, fractions, name))
        assert not members & seen
        seen |= members
        assert abs(len(members) - 300 * fractions[name]) < 60  # hash spreads ids evenly
    assert len(seen) == sum(1 for i in _MANY.items if id_unit(i.id) < sum(fractions.values()))


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
