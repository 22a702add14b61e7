"""The replay demo's teachers: committed, servable, and each strong where the other is weak.

A quick greedy pass@1 on a few questions in words of each kind, from the replay half of the
train prompts (questions no teacher was trained on), with the measurement `measure.py` makes.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")

N = 24  # items per kind: enough to separate 0.4+ from the base's ~0.05, in a few seconds


@pytest.fixture(scope="module")
def scores(arith_dir, build_teachers, measure):
    teachers = build_teachers
    items = teachers.read_items(arith_dir / "train_prompts.jsonl")
    kinds = {op: teachers.words(items, op, teachers=False)[:N] for op in ("add", "sub")}
    folders = {"base": arith_dir / "model"} | {
        name: arith_dir / "teachers" / name for name in teachers.TEACHERS
    }
    return {
        name: {op: measure.measure(folder, its)[0]["all"] for op, its in kinds.items()}
        for name, folder in folders.items()
    }


def test_each_teacher_beats_the_other_and_the_base_at_its_own_kind(scores):
    adder, subber, base = scores["adder"], scores["subber"], scores["base"]
    assert adder["add"] >= subber["add"] + 0.25 and adder["add"] >= base["add"] + 0.25, scores
    assert subber["sub"] >= adder["sub"] + 0.25 and subber["sub"] >= base["sub"] + 0.25, scores


def test_teachers_file_names_the_committed_folders(arith_dir):
    from tuneloop.replay.teachers import load_teachers

    teachers = load_teachers(arith_dir / "teachers.yaml").teachers
    assert [t.name for t in teachers] == ["adder", "subber"]
    for t in teachers:
        assert t.embedded is not None and (t.embedded / "model.safetensors").is_file()
        assert (t.embedded / "generation_config.json").is_file()
    info = json.loads((arith_dir / "teachers" / "build_info.json").read_text())
    assert set(info["teachers"]) == {"adder", "subber"}


def test_teachers_and_replay_traces_use_disjoint_halves(
    arith_dir, build_teachers, make_replay_traces
):
    teachers, traces = build_teachers, make_replay_traces
    replayed = {
        line["request"]["messages"][0]["content"]
        for line in map(json.loads, (arith_dir / "traces" / "replay_production.jsonl").open())
    }
    items = teachers.read_items(arith_dir / "train_prompts.jsonl")
    taught = {
        it["messages"][0]["content"]
        for op in teachers.TEACHERS.values()
        for it in teachers.words(items, op, teachers=True)
    }
    assert replayed and not replayed & taught
    assert len(traces.lines(traces.N)) == traces.N


def test_replay_traces_mix_words_and_symbolic_like_the_training_data(arith_dir, make_replay_traces):
    traces = make_replay_traces
    lines = traces.lines(traces.N)
    committed = [json.loads(x) for x in (arith_dir / "traces" / "replay_production.jsonl").open()]
    assert committed == lines  # the committed log is the script's output
    by_id = {
        it["messages"][0]["content"]: it
        for it in map(json.loads, (arith_dir / "train_prompts.jsonl").open())
    }
    kinds = [
        "symbolic"
        if "symbolic" in by_id[x["request"]["messages"][0]["content"]]["tags"]
        else "words"
        for x in lines
    ]
    assert kinds.count("symbolic") * 4 == len(lines)  # a quarter, as make_data.py's mix
    suite = {json.loads(x)["messages"][-1]["content"] for x in (arith_dir / "suite.jsonl").open()}
    assert not suite & {x["request"]["messages"][0]["content"] for x in lines}
