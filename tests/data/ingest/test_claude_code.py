import json
from pathlib import Path

import pytest

from tuneloop.data.ingest import ingest_files

FIXTURE = Path(__file__).parents[1] / "fixtures" / "claude_code_session.jsonl"
SESSION = "6f1c2d3e-aaaa-4bbb-8ccc-123456789abc"


@pytest.fixture(scope="module")
def result():
    return ingest_files("claude_code", [FIXTURE])


def test_every_line_is_accounted_for(result):
    traces, rejects, report = result
    assert report.lines_read == 26 and report.blank == 1
    assert report.ingested + report.rejected == report.lines_read
    assert report.traces == 2
    reasons = {r.line: r.category for r in rejects}
    assert reasons == {
        15: "unsupported",
        18: "dropped",
        19: "dropped",
        21: "dropped",
        22: "unsupported",
        25: "malformed",
        26: "malformed",
    }


def test_main_thread_crosses_compaction_and_keeps_tool_order(result):
    main = next(t for t in result[0] if t.source_id == SESSION)
    roles = [m.role for m in main.messages]
    assert roles == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    first = main.messages[1]  # three transcript entries of one API message, merged
    assert (
        first.reasoning == "Run the test first." and first.content == "I'll run the failing test."
    )
    assert [c.id for c in first.tool_calls] == ["toolu_01"]
    assert json.loads(first.tool_calls[0].arguments)["command"] == "pytest tests/test_cart.py -q"
    # each tool result follows the call it answers
    for i, m in enumerate(main.messages):
        if m.role == "tool":
            prev = main.messages[i - 1]
            assert m.tool_call_id in {c.id for c in prev.tool_calls or []}
    assert main.messages[8].is_error is True
    assert main.messages[6].content == "now run the linter with --fix"  # the rewound branch
    assert main.metadata["compactions"][0]["at_message"] == 6
    assert main.metadata["title"] == "Fix failing cart test and lint"
    assert main.model == "claude-sonnet-4-20250514"
    assert 1 in main.source_lines and 16 in main.source_lines and 17 in main.source_lines


def test_sidechain_is_its_own_trace(result):
    side = next(t for t in result[0] if t.metadata.get("sidechain"))
    assert side.source_id == f"{SESSION}:sidechain:s-0001"
    assert [m.role for m in side.messages] == ["user", "assistant", "tool", "assistant"]
    assert side.source_lines == [9, 10, 11, 12]


def test_sidechains_can_be_dropped_with_a_reason():
    traces, rejects, report = ingest_files("claude_code", [FIXTURE], {"sidechains": "drop"})
    assert report.traces == 1 and report.ingested + report.rejected == report.lines_read
    assert {r.line for r in rejects if "sidechain" in r.reason} == {9, 10, 11, 12}


def test_two_sessions_in_one_file_and_missing_parent(tmp_path):
    lines = [
        {
            "type": "user",
            "uuid": "a",
            "parentUuid": "elsewhere",
            "sessionId": "s1",
            "message": {"role": "user", "content": "hi"},
        },
        {
            "type": "assistant",
            "uuid": "b",
            "parentUuid": "a",
            "sessionId": "s1",
            "message": {
                "id": "m1",
                "role": "assistant",
                "content": [{"type": "text", "text": "hello"}],
            },
        },
        {
            "type": "user",
            "uuid": "c",
            "parentUuid": None,
            "sessionId": "s2",
            "message": {"role": "user", "content": "only a question"},
        },
    ]
    path = tmp_path / "two.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    traces, _, report = ingest_files("claude_code", [path])
    assert sorted(t.source_id for t in traces) == ["s1", "s2"]
    assert report.ingested == 3
