"""Reading the traffic log: files, torn lines, bad lines, and what counts as a new label."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tuneloop.errors import InputError
from tuneloop.flywheel.exchanges import (
    count_new_labels,
    read_traffic,
    recent_exchanges,
    traffic_files,
)

from ..installed import traffic_status, tuneloop


def exchange(cid: str, t: float, text: str = "what is 2+2", **meta: object) -> dict:
    request: dict = {"model": "m", "messages": [{"role": "user", "content": text}]}
    if meta:
        request["metadata"] = meta
    return {"timestamp": t, "request": request, "response": {"id": cid, "choices": []}}


def feedback(
    cid: str,
    t: float,
    verdict: str | None = "up",
    correction: str | None = None,
    score: float | None = None,
) -> dict:
    return {
        "type": "feedback",
        "completion_id": cid,
        "verdict": verdict,
        "correction": correction,
        "score": score,
        "timestamp": t,
    }


def write(path: Path, lines: list[dict], tail: str = "") -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines) + tail, encoding="utf-8")
    return path


def test_a_folder_is_read_oldest_rotation_first(tmp_path: Path) -> None:
    for name in ("traffic.jsonl", "traffic-10.jsonl", "traffic-2.jsonl", "other.jsonl"):
        write(tmp_path / name, [])
    names = [p.name for p in traffic_files([tmp_path])]
    assert names == ["traffic-2.jsonl", "traffic-10.jsonl", "traffic.jsonl"]


def test_a_missing_path_names_the_setting(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"flywheel.traffic: .*nope does not exist"):
        read_traffic([tmp_path / "nope"])


def test_exchanges_and_feedback_are_parsed(tmp_path: Path) -> None:
    log = write(tmp_path / "traffic.jsonl", [exchange("c1", 10, tag="x"), feedback("c1", 11)])
    traffic = read_traffic([log])
    assert [e.completion_id for e in traffic.exchanges] == ["c1"]
    assert traffic.exchanges[0].metadata == {"tag": "x"}
    assert traffic.feedback[0].verdict == "up" and traffic.feedback[0].is_label


def test_an_unterminated_last_line_is_skipped_and_a_torn_line_counted(tmp_path: Path) -> None:
    log = write(tmp_path / "traffic.jsonl", [exchange("c1", 10)], tail='{"timestamp": 1')
    traffic = read_traffic([log])
    assert len(traffic.exchanges) == 1 and traffic.skipped == []
    # a crash tore line 2; the restarted server appended after it
    write(log, [exchange("c1", 10)], tail='{"timestamp": 1\n' + json.dumps(exchange("c2", 20)))
    log.write_text(log.read_text() + "\n" + json.dumps(feedback("c2", 30)) + "\n")
    traffic = read_traffic([log])
    assert [e.completion_id for e in traffic.exchanges] == ["c1", "c2"]
    assert count_new_labels(traffic, since=None).new == 1
    (why,) = traffic.skipped
    assert "traffic.jsonl:2: not a JSON line" in why


def test_text_completions_are_exchanges_but_not_trainable_labels(tmp_path: Path) -> None:
    """Issue 25 defect 2: a /v1/completions line is read, never an error for the file."""
    text = {
        "timestamp": 10,
        "request": {"model": "m", "prompt": "Once upon"},
        "response": {"id": "cmpl-1", "object": "text_completion", "choices": [{"text": " a"}]},
    }
    lines = [text, exchange("c1", 11), feedback("cmpl-1", 12), feedback("c1#0", 13)]
    lines.append(feedback("c1#4", 14))  # no such choice: the ingester drops it too
    traffic = read_traffic([write(tmp_path / "traffic.jsonl", lines)])
    assert [e.is_chat for e in traffic.exchanges] == [False, True]
    assert traffic.exchanges[0].messages == [{"role": "user", "content": "Once upon"}]
    count = count_new_labels(traffic, since=None)
    assert (count.new, count.orphans, count.untrainable) == (1, 1, 1)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"request": {"messages": []}}, "'timestamp' must be an ISO 8601 time or unix seconds"),
        ({"timestamp": True, "request": {"messages": []}}, "'timestamp' must be an ISO"),
        ({"timestamp": "yesterday", "request": {"messages": []}}, "'timestamp' must be an ISO"),
        ({"timestamp": 1, "request": {"model": "m"}}, "expected an exchange"),
        ({"timestamp": 1, "type": "feedback", "verdict": "up"}, "needs 'completion_id'"),
        (
            {"timestamp": 1, "type": "feedback", "completion_id": "c", "verdict": "meh"},
            "'verdict' must be 'up', 'down' or null",
        ),
        (
            {"timestamp": 1, "type": "feedback", "completion_id": "c", "correction": 3},
            "'correction' must be a non-empty string",
        ),
        (
            {"timestamp": 1, "type": "feedback", "completion_id": "c", "score": "high"},
            "'score' must be a number",
        ),
        (
            {"timestamp": 1, "type": "feedback", "completion_id": "c", "score": 7},
            "'score' must be a number in [0, 1]",
        ),
        (
            {"timestamp": 1, "type": "feedback", "completion_id": "c", "correction": ""},
            "'correction' must be a non-empty string",
        ),
    ],
)
def test_bad_lines_are_skipped_naming_file_and_line(
    tmp_path: Path, line: dict, message: str
) -> None:
    log = write(tmp_path / "traffic.jsonl", [exchange("c0", 1), line, exchange("c3", 3)])
    traffic = read_traffic([log])
    assert [e.completion_id for e in traffic.exchanges] == ["c0", "c3"]
    (why,) = traffic.skipped
    assert "traffic.jsonl:2: " in why and message in why


def test_new_labels_count_label_time_once_per_exchange(tmp_path: Path) -> None:
    lines = [
        exchange("old", 5),  # before the round, labelled after it: new
        exchange("new", 50),
        exchange("twice", 60),
        exchange("scored", 70),
        exchange("stale", 8),
        feedback("old", 120),
        feedback("new", 130, verdict=None, correction="4"),
        feedback("twice", 140),
        feedback("twice", 141, verdict="down"),
        feedback("scored", 150, verdict=None, score=0.5),  # a bare score is no label
        feedback("stale", 9),  # labelled before the round started
        feedback("ghost", 160),  # no such exchange
    ]
    traffic = read_traffic([write(tmp_path / "traffic.jsonl", lines)])
    count = count_new_labels(traffic, since=100.0)
    assert (count.new, count.orphans) == (3, 1)
    assert count_new_labels(traffic, since=None).new == 4
    assert [e.completion_id for e in recent_exchanges(traffic, since=40.0)] == [
        "new",
        "twice",
        "scored",
    ]


def test_iso_timestamps_and_streamed_responses(tmp_path: Path) -> None:
    """The shape `serve.traffic.log` writes: ISO times, and a streamed response's chunks."""
    streamed = {
        "timestamp": "2026-12-01T12:00:00.500Z",
        "request": {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        "response": [{"id": "chunked", "object": "chat.completion.chunk"}],
    }
    naive = {**feedback("chunked", 0), "timestamp": "2026-12-01T12:00:10"}
    traffic = read_traffic([write(tmp_path / "traffic.jsonl", [streamed, naive])])
    assert traffic.exchanges[0].completion_id == "chunked"
    assert traffic.exchanges[0].timestamp == 1796126400.5
    assert traffic.feedback[0].timestamp == 1796126410.0  # no zone: UTC


def test_status_and_ingest_agree_after_a_rotation(tmp_path: Path) -> None:
    """Issue 25 defect 4: 3 corrections after a rotation were 3 new labels in `status` and
    0 training rows. Both now join across the folder's files; an orphan is neither."""
    logs = tmp_path / "traffic"
    logs.mkdir()
    answer = {"message": {"role": "assistant", "content": "?"}}
    chat = [
        {**exchange(f"c{i}", 10 + i), "response": {"id": f"c{i}", "choices": [answer]}}
        for i in range(3)
    ]
    write(logs / "traffic-1.jsonl", chat)
    write(
        logs / "traffic.jsonl",
        [feedback(f"c{i}", 20 + i, verdict="down", correction="4") for i in range(3)]
        + [feedback("gone", 30)],
    )
    summary = traffic_status(tmp_path)
    assert (summary["new_labels"], summary["orphan_feedback"]) == (3, 1)
    ingest = tuneloop("ingest", "-f", "openai_chat", logs, "-o", "t.jsonl", cwd=tmp_path)
    assert ingest.code == 0, ingest.output
    rows = [json.loads(x) for x in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert sum(1 for r in rows if (r["feedback"] or {}).get("correction") == "4") == 3
    assert "1 lines rejected" in ingest.stdout  # the orphan, named in the rejects file
