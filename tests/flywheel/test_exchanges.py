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


def test_an_unterminated_last_line_is_skipped_but_a_bad_line_is_an_error(tmp_path: Path) -> None:
    log = write(tmp_path / "traffic.jsonl", [exchange("c1", 10)], tail='{"timestamp": 1')
    assert len(read_traffic([log]).exchanges) == 1
    write(log, [exchange("c1", 10)], tail='{"timestamp": 1\n')
    with pytest.raises(InputError, match=r"traffic.jsonl:2: not a JSON line"):
        read_traffic([log])


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
            "'correction' must be a string",
        ),
        (
            {"timestamp": 1, "type": "feedback", "completion_id": "c", "score": "high"},
            "'score' must be a number",
        ),
    ],
)
def test_bad_lines_name_file_and_line(tmp_path: Path, line: dict, message: str) -> None:
    log = write(tmp_path / "traffic.jsonl", [exchange("c0", 1), line])
    with pytest.raises(InputError, match=f"traffic.jsonl:2: .*{message}"):
        read_traffic([log])


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
