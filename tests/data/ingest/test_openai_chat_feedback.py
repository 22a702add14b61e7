"""The openai_chat ingester joins traffic-log feedback lines to their exchanges, and rejects
with file and line every line it cannot use (malformed traffic, feedback for unknown ids)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tuneloop.data.ingest import ingest_files
from tuneloop.data.ingest.openai_chat import feedback_line


def exchange(cid: str, *answers: str, text: str = "2+2?") -> dict[str, Any]:
    return {
        "timestamp": "2026-12-01T00:00:00.000Z",
        "request": {"model": "m", "messages": [{"role": "user", "content": text}]},
        "response": {
            "id": cid,
            "object": "chat.completion",
            "model": "m",
            "choices": [
                {"index": i, "message": {"role": "assistant", "content": a}}
                for i, a in enumerate(answers or ("4",))
            ],
        },
    }


def fb(cid: str, **fields: Any) -> dict[str, Any]:
    return {"type": "feedback", "completion_id": cid, **fields, "timestamp": "2026-12-01"}


def write(tmp_path: Path, rows: list[Any]) -> Path:
    path = tmp_path / "traffic.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def ingest(path: Path) -> tuple[dict[str, Any], dict[int, Any], Any]:
    traces, rejects, report = ingest_files("openai_chat", [path])
    assert report.ingested + report.rejected == report.lines_read
    return {t.source_id: t for t in traces}, {r.line: r for r in rejects}, report


def test_feedback_after_and_before_its_exchange_is_joined(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        [
            fb("late", verdict="up"),  # before its exchange: streamed ids are known early
            exchange("early"),
            exchange("late"),
            fb("early", verdict="down", correction="four"),
        ],
    )
    traces, rejects, report = ingest(path)
    assert rejects == {} and report.ingested == 4
    assert traces["early"].feedback.verdict == "down"
    assert traces["early"].feedback.correction == "four"
    assert traces["early"].source_lines == [2, 4]
    assert traces["late"].feedback.score == 1.0 and traces["late"].source_lines == [3, 1]


def test_the_last_feedback_wins_over_earlier_lines_and_inline_feedback(tmp_path: Path) -> None:
    inline = {**exchange("c"), "feedback": {"thumbs": "up"}}
    path = write(tmp_path, [inline, fb("c", verdict="up"), fb("c", score=0.25)])
    traces, rejects, _ = ingest(path)
    assert rejects == {}
    assert traces["c"].feedback.score == 0.25 and traces["c"].feedback.verdict is None
    assert traces["c"].source_lines == [1, 2, 3]


def test_a_completion_id_names_every_choice_and_a_choice_id_one(tmp_path: Path) -> None:
    path = write(tmp_path, [exchange("n", "a", "b"), fb("n", verdict="down"), fb("n#1", score=1)])
    traces, _, _ = ingest(path)
    assert traces["n#0"].feedback.verdict == "down"
    assert traces["n#1"].feedback.score == 1.0


def test_feedback_for_an_unknown_id_is_a_reject_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, [exchange("c"), fb("elsewhere", verdict="up")])
    traces, rejects, report = ingest(path)
    assert report.rejected == 1 and traces["c"].feedback is None
    reject = rejects[2]
    assert reject.file == str(path) and reject.category == "dropped"
    assert "'elsewhere'" in reject.reason and "traffic-<n>.jsonl" in reject.reason


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ({"type": "feedback", "verdict": "up"}, "without a completion_id"),
        (fb("c"), "no verdict, score or correction"),
        (fb("c", verdict="banana"), "is not a judgement"),
        (fb("c", score=3), "not a number in [0, 1]"),
        (fb("c", score=True), "not a number in [0, 1]"),
        (fb("c", correction=["x"]), "non-empty string"),
    ],
)
def test_bad_feedback_lines_are_malformed_rejects(
    tmp_path: Path, line: dict[str, Any], reason: str
) -> None:
    traces, rejects, _ = ingest(write(tmp_path, [exchange("c"), line]))
    assert traces["c"].feedback is None
    assert rejects[2].category == "malformed" and reason in rejects[2].reason


def test_malformed_traffic_lines_are_rejects_with_file_and_line(tmp_path: Path) -> None:
    text_completion = {
        "request": {"model": "m", "prompt": "Once"},
        "response": {"id": "t", "choices": [{"text": " upon"}]},
    }
    no_choices = {**exchange("e"), "response": {"id": "e", "choices": []}}
    path = write(
        tmp_path,
        [
            exchange("ok"),
            '{"request": {"model": "m", "messa',  # torn by a crash
            "[1, 2]",
            text_completion,
            no_choices,
            {"type": "exchange"},
        ],
    )
    traces, rejects, report = ingest(path)
    assert list(traces) == ["ok"] and report.rejected == 5
    assert all(r.file == str(path) for r in rejects.values())
    assert rejects[2].reason.startswith("invalid JSON")
    assert rejects[3].reason == "expected a JSON object, got list"
    assert rejects[4].category == "unsupported" and "text completion" in rejects[4].reason
    assert rejects[5].reason == "response has no choices"
    assert rejects[6].category == "unsupported"


def test_feedback_line_normalizes_verdict_and_keeps_score() -> None:
    got = feedback_line({"verdict": "thumbs_up", "score": 0.5, "correction": "x"})
    assert (got.verdict, got.score, got.correction) == ("up", 0.5, "x")
    assert got.raw == {"verdict": "thumbs_up", "score": 0.5, "correction": "x"}
    only_score = feedback_line({"score": 0})
    assert (only_score.verdict, only_score.score) == ("down", 0.0)
    only_correction = feedback_line({"correction": "x"})
    assert (only_correction.verdict, only_correction.score) == (None, None)
