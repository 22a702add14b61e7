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
    assert "'elsewhere'" in reject.reason and "files before it" in reject.reason


def test_feedback_after_a_rotation_joins_its_exchange_in_the_earlier_file(tmp_path: Path) -> None:
    """Issue 25 defect 4: the exchange in traffic-1.jsonl, its corrections in traffic.jsonl."""
    old = tmp_path / "traffic-1.jsonl"
    old.write_text("".join(json.dumps(exchange(c)) + "\n" for c in ("a", "b", "c")))
    live = write(tmp_path, [fb(c, verdict="down", correction="5") for c in ("a", "b", "c")])
    got, bad, report = ingest_files("openai_chat", [old, live])
    assert not bad and (report.lines_read, report.ingested, report.rejected) == (6, 6, 0)
    assert [t.feedback.correction for t in got] == ["5", "5", "5"]
    # in the other order the exchanges are not read yet: rejects naming the ids, not a loss
    got, bad, report = ingest_files("openai_chat", [live, old])
    assert all(t.feedback is None for t in got) and report.rejected == 3
    assert {r.category for r in bad} == {"dropped"}


def test_the_last_feedback_wins_across_files(tmp_path: Path) -> None:
    old = tmp_path / "traffic-1.jsonl"
    old.write_text(json.dumps(exchange("a")) + "\n" + json.dumps(fb("a", verdict="up")) + "\n")
    live = write(tmp_path, [fb("a", verdict="down"), fb("a", verdict="up"), fb("a", score=0)])
    (trace,), _, report = ingest_files("openai_chat", [old, live])
    assert trace.feedback.score == 0.0 and report.ingested == 5


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
    assert rejects[3].reason.startswith("expected a JSON object, got list")
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


def test_a_choice_id_of_a_one_choice_response_joins_it(tmp_path: Path) -> None:
    """The server accepts feedback naming `<id>#0`; the ingester dropped it as unknown."""
    path = write(tmp_path, [exchange("one"), fb("one#0", verdict="down"), fb("one#3", score=1)])
    traces, rejects, _ = ingest(path)
    assert traces["one"].feedback.verdict == "down"
    assert list(rejects) == [3] and "'one#3'" in rejects[3].reason


def test_feedback_for_a_text_completion_is_named_for_what_it_is(tmp_path: Path) -> None:
    """Was "no exchange with that id" for an exchange two lines above it."""
    text = {
        "request": {"model": "m", "prompt": "Once"},
        "response": {"id": "cmpl-1", "choices": [{"text": " upon"}]},
    }
    path = write(tmp_path, [text, fb("cmpl-1", verdict="up"), exchange("c"), fb("c", score=1)])
    traces, rejects, report = ingest(path)
    assert traces["c"].feedback.score == 1.0 and report.rejected == 2
    assert rejects[2].category == "dropped" and "a text completion" in rejects[2].reason
