"""The arithmetic suite and training prompts: shape, correctness, disjointness, reproducibility."""

from __future__ import annotations

import json
import re
from collections import Counter

# The wordings, written out here independently of make_data.PHRASINGS: (pattern, op, swapped).
WORDINGS = [
    (r"What is (\d+) \+ (\d+)\?", "add", False),
    (r"What is (\d+) plus (\d+)\?", "add", False),
    (r"Add (\d+) and (\d+)\.", "add", False),
    (r"What is the sum of (\d+) and (\d+)\?", "add", False),
    (r"What is (\d+) - (\d+)\?", "sub", False),
    (r"What is (\d+) minus (\d+)\?", "sub", False),
    (r"Subtract (\d+) from (\d+)\.", "sub", True),
    (r"How much is (\d+) take away (\d+)\?", "sub", False),
]


def wording(prompt: str) -> int:
    """The index in `WORDINGS` of the one pattern `prompt` matches."""
    matches = [i for i, (pattern, _, _) in enumerate(WORDINGS) if re.fullmatch(pattern, prompt)]
    assert len(matches) == 1, f"unknown wording: {prompt!r}"
    return matches[0]


def parse(prompt: str) -> tuple[int, str, int, str]:
    """(a, op, b, form) of a question (a - b for subtraction), from its text alone."""
    i = wording(prompt)
    pattern, op, swapped = WORDINGS[i]
    m = re.fullmatch(pattern, prompt)
    assert m is not None
    a, b = (int(m[2]), int(m[1])) if swapped else (int(m[1]), int(m[2]))
    return a, op, b, "symbolic" if i % 4 == 0 else "words"


def test_suite_shape(suite_items):
    assert len(suite_items) >= 300
    ids = [it["id"] for it in suite_items]
    assert len(set(ids)) == len(ids)
    for it in suite_items:
        assert set(it) == {"id", "messages", "answer", "scorer", "tags"}
        assert it["scorer"] == "numeric"
        assert [m["role"] for m in it["messages"]] == ["user"]
        op, digits, form = it["tags"]
        assert op in ("add", "sub") and digits in ("1d", "2d") and form in ("symbolic", "words")
        assert it["id"].startswith(f"{op}-{digits}-")
    cells = Counter(tuple(it["tags"]) for it in suite_items)
    assert len(cells) == 8 and min(cells.values()) >= 10
    # Half the suite is asked in words, and every wording is used.
    forms = Counter(it["tags"][2] for it in suite_items)
    assert abs(forms["symbolic"] - forms["words"]) <= 4
    used = {wording(it["messages"][0]["content"]) for it in suite_items}
    assert used == set(range(len(WORDINGS)))


def test_answers_recompute_from_the_prompt(suite_items, train_items):
    for it in suite_items + train_items:
        a, op, b, form = parse(it["messages"][0]["content"])
        assert it["answer"] == str(a + b if op == "add" else a - b), it["id"]
        assert int(it["answer"]) >= 0, it["id"]
        assert it["tags"] == [op, f"{len(str(max(a, b)))}d", form], it["id"]


def test_train_prompts_are_many_unique_and_disjoint_from_the_suite(
    make_data, suite_items, train_items
):
    norm = make_data.normalize_prompt
    suite = {norm(it["messages"][0]["content"]) for it in suite_items}
    train = [norm(it["messages"][0]["content"]) for it in train_items]
    assert len(train) >= 2000
    assert len(set(train)) == len(train)
    assert suite.isdisjoint(train)
    # Stronger: no training prompt asks a suite problem, in whatever wording.
    problems = {parse(it["messages"][0]["content"])[:3] for it in suite_items}
    assert problems.isdisjoint(parse(it["messages"][0]["content"])[:3] for it in train_items)
    ids = [it["id"] for it in train_items]
    assert len(set(ids)) == len(ids)
    assert set(ids).isdisjoint(it["id"] for it in suite_items)


def test_pretraining_text_is_disjoint_from_the_suite(
    make_data, build_model, suite_items, arith_dir
):
    info = json.loads((arith_dir / "model" / "build_info.json").read_text())
    n = info["pretraining_problems"]
    problems = build_model.pretraining_problems(n, arith_dir / "suite.jsonl")
    assert len(problems) == info["steps"] * info["batch_size"]
    suite = {make_data.normalize_prompt(it["messages"][0]["content"]) for it in suite_items}
    assert suite.isdisjoint({make_data.normalize_prompt(p.prompt) for p in problems})
    keys = {parse(it["messages"][0]["content"])[:3] for it in suite_items}
    assert keys.isdisjoint(parse(p.prompt)[:3] for p in problems)
    # ...and it covers the suite's cells, so the arithmetic is in-distribution, but never asks
    # in words: that is the gap the demo loop closes.
    assert {tuple(it["tags"][:2]) for it in suite_items} == {
        (p.op, f"{p.digits}d") for p in problems
    }
    assert {parse(p.prompt)[3] for p in problems} == {"symbolic"}


def test_normalize_prompt_lowercases_and_collapses_whitespace(make_data):
    assert make_data.normalize_prompt("  What is\t3 +\n 4? ") == "what is 3 + 4?"


def test_make_data_regenerates_byte_identical_files(make_data, tmp_path, arith_dir):
    make_data.main(["--out", str(tmp_path)])
    for name in ("suite.jsonl", "train_prompts.jsonl"):
        assert (tmp_path / name).read_bytes() == (arith_dir / name).read_bytes(), name
