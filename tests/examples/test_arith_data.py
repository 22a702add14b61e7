"""The arithmetic suite and training prompts: shape, correctness, disjointness, reproducibility."""

from __future__ import annotations

import json
from collections import Counter


def test_suite_shape(suite_items):
    assert len(suite_items) >= 300
    ids = [it["id"] for it in suite_items]
    assert len(set(ids)) == len(ids)
    for it in suite_items:
        assert set(it) == {"id", "messages", "answer", "scorer", "tags"}
        assert it["scorer"] == "numeric"
        assert [m["role"] for m in it["messages"]] == ["user"]
        op, digits = it["tags"]
        assert op in ("add", "sub") and digits in ("1d", "2d", "3d")
        assert it["id"].startswith(f"{op}-{digits}-")
    cells = Counter(tuple(it["tags"]) for it in suite_items)
    assert len(cells) == 6 and min(cells.values()) >= 20


def test_answers_recompute_from_the_prompt(suite_items, train_items):
    for it in suite_items + train_items:
        a, sym, b = it["messages"][0]["content"].removeprefix("What is ").rstrip("?").split()
        expected = int(a) + int(b) if sym == "+" else int(a) - int(b)
        assert it["answer"] == str(expected), it["id"]
        digits = len(str(max(int(a), int(b))))
        assert it["tags"] == ["add" if sym == "+" else "sub", f"{digits}d"], it["id"]


def test_train_prompts_are_many_unique_and_disjoint_from_the_suite(
    make_data, suite_items, train_items
):
    norm = make_data.normalize_prompt
    suite = {norm(it["messages"][0]["content"]) for it in suite_items}
    train = [norm(it["messages"][0]["content"]) for it in train_items]
    assert len(train) >= 2000
    assert len(set(train)) == len(train)
    assert suite.isdisjoint(train)
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
    # ...and it covers the suite's cells, so the suite is in-distribution.
    assert {(p.op, p.digits) for p in problems} == {
        (it["tags"][0], int(it["tags"][1][0])) for it in suite_items
    }


def test_normalize_prompt_lowercases_and_collapses_whitespace(make_data):
    assert make_data.normalize_prompt("  What is\t3 +\n 4? ") == "what is 3 + 4?"


def test_make_data_regenerates_byte_identical_files(make_data, tmp_path, arith_dir):
    make_data.main(["--out", str(tmp_path)])
    for name in ("suite.jsonl", "train_prompts.jsonl"):
        assert (tmp_path / name).read_bytes() == (arith_dir / name).read_bytes(), name
