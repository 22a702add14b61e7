"""Open-ended steps (no verifier) scored by the LLM judge (`replay.judge: judge`): pairwise
against the original and graded without a reference, each giving SFT rows and DPO pairs; a
judgement that cannot be had is that call's scorer error; the report counts the judge's
share; a judge file that is missing is named by its key before any teacher is called."""

from __future__ import annotations

import math
import re
import subprocess
from pathlib import Path

import pytest

from tuneloop.config.replay import ReplayConfig
from tuneloop.errors import InputError
from tuneloop.records import read_jsonl, read_record
from tuneloop.records.replay import ReplayReport
from tuneloop.records.trace import Message, Trace
from tuneloop.replay import replay
from tuneloop.replay.teachers import check_replay
from tuneloop.train.data import Row, dpo_rows, sft_rows

from ..installed import script
from ..judge_fixture import write_judge

ARITH = Path(__file__).resolve().parents[2] / "examples" / "arith"
COST = (100 * 1.0 + 10 * 10.0) / 1e6  # one judge request: the fake's usage at its price
OPEN = [  # (a, b, what the trace's own answer said)
    (2, 3, "The answer is 5."),  # right: a teacher can at best tie it
    (4, 4, "The answer is 11."),  # off by 3: both teachers beat it
    (1, 6, "The answer is 7.5."),  # off by 0.5: `right` beats it, `wrong` (off by 1) loses
    (10, 7, "I do not know."),  # no answer: both teachers beat it
    (3, 3, "The answer is 7.0."),  # off by 1, as `wrong` is: `right` wins, `wrong` ties
]


def _total(content: str) -> int:
    a, b = re.search(r"What is (\d+) \+ (\d+)\?", content).groups()
    return int(a) + int(b)


def _miss(text: str, total: int) -> float:
    found = re.findall(r"-?\d+(?:\.\d+)?", text)
    return abs(float(found[-1]) - total) if found else math.inf


def closer_wins(content: str) -> tuple[int, str]:
    """A judge that knows arithmetic: pairwise, the answer nearer the sum wins; graded, 1 for
    the sum exactly."""
    total = _total(content)
    if "RESPONSE A:" in content:
        a, b = content.split("RESPONSE A:")[1].split("RESPONSE B:")
        da, db = _miss(a, total), _miss(b, total)
        return 200, "VERDICT: " + ("TIE" if da == db else "A" if da < db else "B")
    said = content.split("RESPONSE:")[1]
    return 200, "SCORE: " + ("1" if _miss(said, total) == 0 else "0")


def _open_trace(i: int, a: int, b: int, said: str) -> Trace:
    return Trace(
        source="chat",
        source_id=f"o{i}",
        source_file="traces.jsonl",
        source_lines=[i + 1],
        messages=[
            Message(role="system", content="Answer briefly."),
            Message(role="user", content=f"What is {a} + {b}?"),
            Message(role="assistant", content=said),
        ],
    )


def no_view_on_10_plus_7(content: str) -> tuple[int, str]:
    """`closer_wins`, but prose (an unparsable judgement) about 10 + 7."""
    return (200, "Both fine, I suppose.") if "10 + 7" in content else closer_wins(content)


def _setup(tmp_path, kit, teachers_server, fake_judge, mode: str, **judge):
    fake_judge.answer = closer_wins
    traces = [_open_trace(i, *row) for i, row in enumerate(OPEN)]
    traces.append(kit.arith_trace(9, 20, 22))  # a verified step: not the judge's
    path = kit.write_traces(tmp_path / "traces.jsonl", traces)
    teachers = kit.write_teachers(
        tmp_path / "teachers.yaml", teachers_server.url, [{"name": "right"}, {"name": "wrong"}]
    )
    judge_file = write_judge(tmp_path / mode, fake_judge.url, mode=mode, **judge)
    settings = ReplayConfig(judge="judge", judge_args={"judge": str(judge_file)}, concurrency=4)
    return path, teachers, settings


def _rows(out: Path) -> tuple[list[dict], list[dict]]:
    sft, dpo = read_jsonl(out / "sft.jsonl"), read_jsonl(out / "dpo.jsonl")
    assert sft_rows([Row("x", r) for r in sft]) and dpo_rows([Row("x", r) for r in dpo])
    return sft, dpo


def test_pairwise_a_teacher_that_beats_the_original_is_distilled(
    tmp_path, kit, teachers_server, fake_judge
) -> None:
    traces, teachers, settings = _setup(tmp_path, kit, teachers_server, fake_judge, "pairwise")
    out = tmp_path / "out"
    report = replay(traces, teachers, out, settings).report
    assert report == read_record(out / "report.json", ReplayReport)
    sft, dpo = _rows(out)
    judged_sft = {r["source_id"]: r["teacher"] for r in sft if r["source_id"].startswith("chat")}
    assert judged_sft == {f"chat/o{i}#2": "right" for i in (1, 2, 3, 4)}  # o0: only a tie
    pairs = sorted(r["source_id"] for r in dpo if r["source_id"].startswith("chat"))
    assert pairs == [
        "chat/o1#2|original",
        "chat/o2#2|original",
        "chat/o2#2|wrong",  # it lost to the original: a rejected side
        "chat/o3#2|original",
        "chat/o4#2|original",  # `wrong` only tied the original: not a rejected side
    ]
    j = report.judged
    assert j is not None and (j.mode, j.model, j.scorer) == ("pairwise", "fake-judge", "judge")
    assert (j.steps, j.calls_scored, j.originals_scored, j.errors) == (5, 10, 5, 0)
    assert (j.sft_rows, j.dpo_pairs) == (4, 5) and (report.sft_rows, report.dpo_pairs) == (5, 6)
    # both orders per teacher answer (o0's `right` said what the original said: its two
    # orders are one request, asked once); the original is not compared with itself
    assert fake_judge.calls == 19
    assert j.cost_usd == pytest.approx(20 * COST)  # what the judgements cost to make
    assert (report.original_scored, report.original_passed) == (6, 2)  # o0 held; the verified
    by = {t.name: t for t in report.teachers}
    assert (by["right"].passed, by["wrong"].passed) == (5, 2)  # a tie is not a pass
    assert "Judged by judge (pairwise, fake-judge): 5 steps" in (out / "report.md").read_text()


def test_grade_mode_grades_without_the_original_as_reference(
    tmp_path, kit, teachers_server, fake_judge
) -> None:
    traces, teachers, settings = _setup(tmp_path, kit, teachers_server, fake_judge, "grade")
    out = tmp_path / "out"
    report = replay(traces, teachers, out, settings).report
    asked = [b["messages"][0]["content"] for b in fake_judge.bodies]
    # 10 teacher answers and 5 originals, o0's original the same as `right`'s (cached)
    assert len(asked) == 14 and all("REFERENCE: \n" in c for c in asked)
    sft, dpo = _rows(out)
    assert {r["teacher"] for r in sft} == {"right"} and len(sft) == 6
    originals = sorted(r["source_id"] for r in dpo if r["rejected_from"] == "original")
    assert originals == [f"chat/o{i}#2|original" for i in (1, 2, 3, 4)]  # o0's was right
    j = report.judged
    assert j is not None and j.mode == "grade"
    assert (j.steps, j.calls_scored, j.originals_scored, j.errors) == (5, 10, 5, 0)
    assert (j.sft_rows, j.dpo_pairs) == (5, 9) and j.cost_usd == pytest.approx(15 * COST)


def test_a_judgement_that_cannot_be_had_is_that_calls_scorer_error(
    tmp_path, kit, teachers_server, fake_judge
) -> None:
    traces, teachers, settings = _setup(
        tmp_path, kit, teachers_server, fake_judge, "grade", parse_retries=0
    )
    fake_judge.answer = no_view_on_10_plus_7
    report = replay(traces, teachers, tmp_path / "out", settings).report
    calls = [c for c in read_jsonl(tmp_path / "out" / "calls.jsonl") if c["trace"] == "chat/o3"]
    assert {c["status"] for c in calls} == {"scorer_error"} and len(calls) == 2
    assert all("JudgeUnparsable" in c["error"] and c["passed"] is None for c in calls)
    j = report.judged
    assert j is not None and (j.calls_scored, j.originals_scored, j.errors) == (8, 4, 3)
    assert (j.sft_rows, j.dpo_pairs) == (4, 7)
    assert all(t.scorer_errors == 1 for t in report.teachers)


def test_a_rerun_scores_again_what_the_judge_could_not_and_asks_no_teacher(
    tmp_path, kit, teachers_server, fake_judge
) -> None:
    traces, teachers, settings = _setup(
        tmp_path, kit, teachers_server, fake_judge, "grade", parse_retries=0
    )
    fake_judge.answer = no_view_on_10_plus_7
    replay(traces, teachers, tmp_path / "out", settings)
    asked = sum(teachers_server.state.calls.values())
    fake_judge.answer = closer_wins  # the judge is back
    report = replay(traces, teachers, tmp_path / "out", settings).report
    assert sum(teachers_server.state.calls.values()) == asked  # no teacher asked again
    assert report.cost_usd_this_run == 0
    calls = [c for c in read_jsonl(tmp_path / "out" / "calls.jsonl") if c["trace"] == "chat/o3"]
    assert [c["status"] for c in calls] == ["scorer_error"] * 2 + ["ok"] * 2  # appended, kept
    j = report.judged
    assert j is not None and j.errors == 0 and (j.calls_scored, j.originals_scored) == (10, 5)


def test_a_missing_judge_file_is_named_before_any_call(tmp_path, kit, teachers_server) -> None:
    path = kit.write_traces(tmp_path / "traces.jsonl", [_open_trace(0, 1, 1, "2")])
    teachers = kit.write_teachers(tmp_path / "t.yaml", teachers_server.url, [{"name": "right"}])
    for args, problem in (
        ({}, "needs a judge file: set replay.judge_args.judge"),
        ({"judge": str(tmp_path / "nope.yaml")}, "nope.yaml: judge file not found"),
    ):
        settings = ReplayConfig(judge="judge", judge_args=args)
        [(key, message)] = check_replay(settings)
        assert key == "replay.judge_args.judge" and problem in message
        with pytest.raises(InputError, match=f"replay.judge_args.judge: .*{problem}"):
            replay(path, teachers, tmp_path / "out", settings)
    assert teachers_server.state.requests == []


def test_the_judge_file_resolves_against_loop_yaml(tmp_path) -> None:
    cfg = ReplayConfig.model_validate(
        {"judge": "judge", "judge_args": {"judge": "judges/j.yaml"}},
        context={"base_dir": tmp_path},
    )
    assert cfg.judge_args["judge"] == str(tmp_path / "judges" / "j.yaml")


def test_check_names_the_judge_file_key(tmp_path) -> None:
    proc = [
        script(),
        "check",
        str(ARITH / "loop.yaml"),
        "replay.judge=judge",
        f"replay.judge_args={{judge: {tmp_path / 'nope.yaml'}}}",
    ]
    done = subprocess.run(proc, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "replay.judge_args.judge" in done.stderr and "judge file not found" in done.stderr
