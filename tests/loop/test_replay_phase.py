"""The replay phase in the loop: traces → teachers → rows and pairs that training reads.

The real data, replay, report, gate, capstone and archive phases on fakeloop's table, with
fake teachers over HTTP (tests/replay/conftest.py) and `tuneloop.train.run.train` replaced by
a stand-in that records what it was handed; `tuneloop check` refusals run the installed script.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tuneloop.config import load_config
from tuneloop.loop.corpus_data import REPLAY_DPO, REPLAY_SFT, replay_problems
from tuneloop.records import ReplayReport, read_record, sha256_file
from tuneloop.replay.teachers import load_teachers

from ..replay.conftest import FakeTeachers, TeacherServer, write_teachers
from . import fakeloop
from .preflight.test_checks import (
    TUNELOOP,
    assert_nothing_written,
    line_of,
    project,  # noqa: F401  (fixture)
)

LEAK = "What is 7 + 1?"  # item q0007 of fakeloop's suite


def _traffic(tmp_path: Path) -> Path:
    """Three logged exchanges with a reference answer; one asks a suite item."""

    def line(i: int, q: str, said: str, answer: str) -> dict[str, Any]:
        choice = {"index": 0, "message": {"role": "assistant", "content": said}}
        return {
            "request": {"messages": [{"role": "user", "content": q}]},
            "response": {"id": f"r{i}", "choices": [choice]},
            "answer": answer,
            "scorer": "numeric",
        }

    rows = [
        line(1, "What is 500 + 2?", "503", "502"),
        line(2, "What is 600 + 3?", "603", "603"),
        line(3, LEAK, "9", "8"),
    ]
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in rows))
    (tmp_path / "corpus.yaml").write_text("sources: [{path: log.jsonl}]\n")
    return path


def _round(tmp_path: Path, url: str, monkeypatch: Any, **sections: Any) -> dict[str, Any]:
    """One fake round with the real replay phase; what the stand-in trainer was handed."""
    _traffic(tmp_path)
    teachers = [{"name": "good", "model": "right"}, {"name": "bad", "model": "wrong"}]
    write_teachers(tmp_path / "teachers.yaml", url, teachers)
    config = fakeloop.write_config(
        tmp_path,
        data={"corpus": str(tmp_path / "corpus.yaml"), **sections.pop("data", {})},
        replay={"teachers": str(tmp_path / "teachers.yaml")},
        **sections,
    )
    seen = fakeloop.run_with_train_adapter(config, monkeypatch)
    seen["config"] = config
    return seen


@pytest.fixture
def teachers() -> Any:
    server = TeacherServer(FakeTeachers())
    yield server
    server.stop()


def test_composite_trains_on_the_replay_pairs_without_suite_items(
    tmp_path: Path, teachers: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _round(
        tmp_path,
        teachers.url,
        monkeypatch,
        train={"method": "composite", "composite": {"beta": 0.1}},
    )
    work = tmp_path / "work"
    # the data phase's canonical traces were replayed; GRPO prompts come from the corpus
    assert seen["data"] == work / "data" / "grpo.jsonl"
    assert seen["settings"].composite.pairs == work / "replay" / REPLAY_DPO
    pairs = [json.loads(x) for x in (work / "replay" / REPLAY_DPO).read_text().splitlines()]
    prompts = {p["prompt"][-1]["content"] for p in pairs}
    assert prompts == {"What is 500 + 2?", "What is 600 + 3?"}  # the leak is gone
    assert {p["rejected_from"] for p in pairs} == {"bad", "original"}
    removed = json.loads((work / "replay" / "decontamination.json").read_text())
    assert removed["files"]["dpo.jsonl"]["contaminated"] == 2  # bad's and the original's
    assert removed["files"]["sft.jsonl"]["contaminated"] == 1
    assert LEAK not in (work / "replay" / REPLAY_SFT).read_text()
    report = read_record(work / "replay" / "report.json", ReplayReport)
    assert [(t.name, t.passed, t.scored) for t in report.teachers] == [
        ("good", 3, 3),
        ("bad", 0, 3),
    ]
    # the capstone names the replay report, its hash, and each teacher's pass rate
    capstone = (work / "capstone" / "report.md").read_text()
    assert "## Teacher replay" in capstone
    assert sha256_file(work / "replay" / "report.json")[:16] in capstone
    assert "| good | 100.0% |" in capstone and "| bad | 0.0% |" in capstone
    manifest = json.loads(next((tmp_path / "archive").glob("*/manifest.json")).read_text())
    assert "replay/report.json" in json.dumps(manifest)
    # a re-run skips the replay: no teacher is asked again
    calls = sum(teachers.state.calls.values())
    again = _round(
        tmp_path,
        teachers.url,
        monkeypatch,
        train={"method": "composite", "composite": {"beta": 0.1}},
    )
    assert sum(teachers.state.calls.values()) == calls
    assert again["state"].phases["replay"].fingerprint == seen["state"].phases["replay"].fingerprint


def test_sft_on_the_teacher_rows(
    tmp_path: Path, teachers: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _round(tmp_path, teachers.url, monkeypatch, data={"output": "replay_sft"})
    assert seen["data"] == tmp_path / "work" / "replay" / REPLAY_SFT
    rows = [json.loads(x) for x in seen["data"].read_text().splitlines()]
    assert [r["teacher"] for r in rows] == ["good", "good"]
    assert seen["settings"].composite.pairs is None


def test_self_distillation_hints_default_to_the_replay_answers(
    tmp_path: Path, teachers: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    composite = {"alpha": 0.1, "hint_source": "replay"}
    seen = _round(
        tmp_path, teachers.url, monkeypatch, train={"method": "composite", "composite": composite}
    )
    assert seen["settings"].composite.hint_rows == tmp_path / "work" / "replay" / REPLAY_SFT
    assert seen["settings"].composite.pairs is None  # beta 0: no pairs read
    # without a replay there is nothing to default to: refused, naming the key
    config = fakeloop.write_config(tmp_path, train={"method": "composite", "composite": composite})
    problems = dict(replay_problems(load_config(config)))
    assert (
        "hint_source: replay needs the teachers' answers" in problems["train.composite.hint_rows"]
    )


def test_replay_problems_name_their_keys(tmp_path: Path) -> None:
    config = fakeloop.write_config(
        tmp_path,
        replay={"teachers": "teachers.yaml"},
        train={"method": "composite", "composite": {"beta": 0.1}},
    )
    problems = dict(replay_problems(load_config(config)))
    assert "replay.traces" in problems  # no traces and no data phase to write them
    config = fakeloop.write_config(
        tmp_path,
        replay={"sample_fraction": 0.5},
        train={"method": "composite", "composite": {"beta": 0.1}},
    )
    cfg = load_config(config)  # beta without pairs loads: a replay may supply them
    problems = dict(replay_problems(cfg))
    assert set(problems) == {"replay.teachers", "train.composite.pairs"}


def test_check_refuses_a_replay_output_without_a_replay(project: Path) -> None:  # noqa: F811
    loop = project / "loop.yaml"
    text = loop.read_text()
    text = text.replace("  data: train.jsonl\n", "")
    text += "data:\n  output: replay_sft\n"
    loop.write_text(text)
    done = subprocess.run([str(TUNELOOP), "check", str(loop)], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    line = line_of(text, "  output: replay_sft")
    assert f"data.output (line {line}): 'replay_sft' is the replay phase's output" in done.stderr
    assert "Traceback" not in done.stderr
    assert_nothing_written(project)


def test_embedded_teachers_are_inputs_of_the_replay(tmp_path: Path) -> None:
    from tuneloop.loop.corpus_data import replay_files

    (tmp_path / "t1").mkdir()
    (tmp_path / "teachers.yaml").write_text("teachers:\n  - {name: t1, embedded: t1}\n")
    config = fakeloop.write_config(
        tmp_path,
        replay={"teachers": str(tmp_path / "teachers.yaml"), "traces": str(tmp_path / "x")},
    )
    files = replay_files(load_config(config))
    assert files["teacher:t1"] == tmp_path / "t1"
    assert set(files) == {"teachers", "suite", "traces", "teacher:t1"}
    assert load_teachers(tmp_path / "teachers.yaml").teachers[0].name == "t1"


def test_the_replay_demo_config_passes_check() -> None:
    config = Path(__file__).resolve().parents[2] / "examples" / "arith" / "loop_replay.yaml"
    done = subprocess.run([str(TUNELOOP), "check", str(config)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "replay.teachers" not in done.stderr  # its outputs feed the composite training


def test_a_redone_replay_reuses_the_quarantined_calls(
    tmp_path: Path, teachers: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    train = {"method": "composite", "composite": {"beta": 0.1}}
    _round(tmp_path, teachers.url, monkeypatch, train=train, gate={"enabled": False})
    calls = sum(teachers.state.calls.values())
    assert calls == 6  # 3 steps × 2 teachers
    # a changed replay setting redoes the phase in a fresh folder (the old one quarantined)
    config = fakeloop.write_config(
        tmp_path,
        data={"corpus": str(tmp_path / "corpus.yaml")},
        replay={"teachers": str(tmp_path / "teachers.yaml"), "pass_threshold": 0.9},
        train=train,
        gate={"enabled": False},
    )
    again = fakeloop.run_with_train_adapter(config, monkeypatch)
    assert sum(teachers.state.calls.values()) == calls  # nothing asked, nothing paid again
    work = tmp_path / "work"
    (old,) = (work / "quarantine").glob("*-replay")
    report = read_record(work / "replay" / "report.json", ReplayReport)
    assert report.calls_this_run == 0 and report.cost_usd_this_run == 0
    assert report.calls_reused == 6 and report.reused_from == {str(old / "calls.jsonl"): 6}
    assert (
        "Reused from an earlier replay's log: 6 calls"
        in (work / "replay" / "report.md").read_text()
    )
    assert again["state"].phases["replay"].notes["calls_reused"] == 6
    assert (work / "replay" / REPLAY_DPO).read_bytes() == (old / REPLAY_DPO).read_bytes()
