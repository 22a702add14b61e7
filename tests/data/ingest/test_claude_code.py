import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tuneloop.data.ingest.claude_code  # noqa: F401  (registers)
from tests.data.test_secrets_never_written import SEP, secret
from tuneloop.data.ingest import detect_format, ingest_files, sort_sources
from tuneloop.errors import InputError

from .kit import assert_ingest_hides, balanced

FIXTURES = Path(__file__).parents[1] / "fixtures"
FIXTURE = FIXTURES / "claude_code_session.jsonl"
SESSION = "6f1c2d3e-aaaa-4bbb-8ccc-123456789abc"
REAL = FIXTURES / "claude_code"
PREFIX = "ae4a77f8-aedd-4bc1-888f-c94edc91af04"
MAIN = REAL / f"{PREFIX}.jsonl"
AGENT = REAL / PREFIX / "subagents" / "agent-aac57f5.jsonl"
COMPACT = REAL / PREFIX / "subagents" / "agent-acompact-946d2b.jsonl"
PARALLEL = REAL / "subagent.jsonl"


# ---- the hand-written fixture ------------------------------------------------------------------


@pytest.fixture(scope="module")
def result():
    return ingest_files("claude_code", [FIXTURE])


def test_every_line_is_accounted_for(result):
    traces, rejects, report = result
    assert report.lines_read == 26 and balanced(report)
    assert report.traces == 2
    reasons = {r.line: r.category for r in rejects}
    assert reasons == {
        18: "dropped",
        19: "dropped",
        21: "dropped",
        25: "malformed",
        26: "malformed",
    }
    assert report.skipped == {"snapshot": 1, "system entry": 1}  # lines 15 and 22


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
    assert "unfinished" not in main.metadata


def test_sidechain_is_its_own_trace(result):
    side = next(t for t in result[0] if t.metadata.get("sidechain"))
    assert side.source_id == f"{SESSION}:sidechain:s-0001"
    assert [m.role for m in side.messages] == ["user", "assistant", "tool", "assistant"]
    assert side.source_lines == [9, 10, 11, 12]
    assert side.metadata["parent_session"] == SESSION


def test_sidechains_can_be_dropped_with_a_reason():
    traces, rejects, report = ingest_files("claude_code", [FIXTURE], {"sidechains": "drop"})
    assert report.traces == 1 and balanced(report)
    assert {r.line for r in rejects if "sidechain" in r.reason} == {9, 10, 11, 12}


def _write(tmp_path: Path, records: list[dict], name: str = "s.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(x) + "\n" for x in records))
    return path


def _turn(kind: str, uuid: str, parent: str | None, content, sid: str = "s1", **extra) -> dict:
    message = {"role": kind, "content": content}
    if kind == "assistant":
        message.update(id=extra.pop("mid", f"m-{uuid}"), model="claude-x")
    return {
        "type": kind,
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": sid,
        "message": message,
        **extra,
    }


def test_two_sessions_in_one_file_and_missing_parent(tmp_path):
    path = _write(
        tmp_path,
        [
            _turn("user", "a", "elsewhere", "hi"),
            _turn("assistant", "b", "a", [{"type": "text", "text": "hello"}]),
            _turn("user", "c", None, "only a question", sid="s2"),
        ],
    )
    traces, _, report = ingest_files("claude_code", [path])
    assert sorted(t.source_id for t in traces) == ["s1", "s2"]
    assert report.ingested == 3


# ---- real transcripts (tests/data/fixtures/claude_code/SOURCES.md) ----------------------------


def test_real_session_prefix_merges_split_messages_and_recovers_parallel_results():
    (trace,), rejects, report = ingest_files("claude_code", [MAIN])
    assert (report.lines_read, report.ingested, rejects) == (131, 46, [])
    assert report.skipped == {"progress": 83, "snapshot": 2}
    roles = [m.role for m in trace.messages]
    assert (roles.count("user"), roles.count("assistant"), roles.count("tool")) == (2, 9, 16)
    assert sum(len(m.tool_calls or []) for m in trace.messages) == 17
    assert trace.messages[0].content.startswith("Work on bead spotter-4te.")
    # lines 8, 9, 10, 15: one API message (text, thinking, two Bash calls); the second result
    # (line 25) forks off the second call, not the first: both follow the merged message
    first = trace.messages[1]
    assert first.reasoning and [c.name for c in first.tool_calls] == ["Bash", "Bash"]
    assert [m.tool_call_id for m in trace.messages[2:4]] == [c.id for c in first.tool_calls]
    # lines 44-65: six Read calls of one message, each result written before the next call
    reads = trace.messages[8]
    assert [c.name for c in reads.tool_calls] == ["Read"] * 6
    assert [m.tool_call_id for m in trace.messages[9:15]] == [c.id for c in reads.tool_calls]
    for i, m in enumerate(trace.messages):
        if m.role == "tool":
            before = next(p for p in trace.messages[i::-1] if p.role == "assistant")
            assert m.tool_call_id in {c.id for c in before.tool_calls or []}
    assert trace.model == "claude-haiku-4-5-20251001"
    assert trace.started_at == "2026-02-12T14:11:56.103Z"


def test_real_session_cut_mid_tool_is_kept_and_marked_unfinished():
    (trace,), _, _ = ingest_files("claude_code", [MAIN])
    last = trace.messages[-1]
    assert last.role == "assistant" and [c.name for c in last.tool_calls] == ["Edit"]
    assert trace.metadata["unfinished"] is True
    assert trace.metadata["unanswered_calls"] == ["toolu_01BJyzB1bUzxeiUs95DkBV4N"]


def test_real_subagent_file_ingests_alone_and_joins_its_parent_by_id():
    (parent,), _, _ = ingest_files("claude_code", [MAIN])
    (agent,), rejects, report = ingest_files("claude_code", [AGENT])
    assert (report.lines_read, report.ingested, report.skipped, rejects) == (
        40,
        28,
        {"progress": 12},
        [],
    )
    assert agent.source_id == f"{PREFIX}:agent:aac57f5"
    assert agent.metadata["sidechain"] is True and agent.metadata["agent_id"] == "aac57f5"
    assert agent.metadata["parent_session"] == parent.source_id == PREFIX
    assert [m.role for m in agent.messages].count("tool") == 12
    assert [c.name for c in agent.messages[1].tool_calls] == ["WebSearch"] * 6
    (task,) = [c for m in parent.messages for c in m.tool_calls or [] if c.name == "Task"]
    assert parent.metadata["subagents"] == {task.id: agent.source_id}
    assert agent.messages[0].content == json.loads(task.arguments)["prompt"]


def test_real_compaction_subagent_whose_parents_are_elsewhere():
    (trace,), rejects, report = ingest_files("claude_code", [COMPACT])
    assert (report.lines_read, report.ingested, rejects) == (2, 2, [])
    assert [m.role for m in trace.messages] == ["user", "assistant"]
    assert trace.source_id == f"{PREFIX}:agent:acompact-946d2b"
    assert "<analysis>" in trace.messages[1].content


def test_real_parallel_results_out_of_call_order_follow_the_calls():
    (trace,), rejects, report = ingest_files("claude_code", [PARALLEL])
    assert (report.lines_read, report.ingested, rejects) == (96, 48, [])
    assert report.skipped == {"progress": 44, "snapshot": 3, "system entry": 1}
    roles = [m.role for m in trace.messages]
    assert (roles.count("user"), roles.count("assistant"), roles.count("tool")) == (4, 12, 16)
    first = trace.messages[2]  # lines 6-12; results on lines 13-16 in the order A, C, D, B
    assert [c.name for c in first.tool_calls] == ["WebFetch", "WebSearch", "WebSearch", "WebSearch"]
    assert [m.tool_call_id for m in trace.messages[3:7]] == [c.id for c in first.tool_calls]
    assert first.content.startswith("I'll research")  # the "\n\n" text block is not content
    assert "[Request interrupted by user]" in [m.content for m in trace.messages]
    assert "unfinished" not in trace.metadata


def test_reasoning_can_be_dropped():
    (trace,), _, report = ingest_files("claude_code", [PARALLEL], {"reasoning": "drop"})
    assert not any(m.reasoning for m in trace.messages)
    assert report.skipped["reasoning dropped"] == 4 and report.ingested == 44
    assert balanced(report)


def test_auto_detects_every_transcript_of_a_project_folder_and_nothing_else():
    groups, unknown = sort_sources([REAL])
    assert sorted(p.name for p in groups["claude_code"]) == [
        f"{PREFIX}.jsonl",
        "agent-aac57f5.jsonl",
        "agent-acompact-946d2b.jsonl",
        "subagent.jsonl",
    ]
    assert detect_format(FIXTURE) == "claude_code"
    others = [
        p
        for p in FIXTURES.rglob("*")
        if p.is_file() and p.suffix in (".json", ".jsonl", ".md") and "claude_code" not in p.name
    ]
    others = [p for p in others if REAL not in p.parents and p.name != "SOURCES.md"]
    assert others and all(detect_format(p) != "claude_code" for p in others)


# ---- record kinds and decisions ----------------------------------------------------------------


def test_compaction_whose_logical_parent_is_not_in_the_file_continues_the_thread(tmp_path):
    """Claude Code 2.1 writes boundaries whose logicalParentUuid names no record of the file."""
    path = _write(
        tmp_path,
        [
            _turn("user", "u1", None, "fix it"),
            _turn("assistant", "a1", "u1", [{"type": "text", "text": "done"}]),
            {
                "type": "system",
                "subtype": "compact_boundary",
                "uuid": "c1",
                "parentUuid": None,
                "logicalParentUuid": "not-in-file",
                "sessionId": "s1",
            },
            _turn("user", "u2", "c1", "summary", isCompactSummary=True),
            _turn("user", "u3", "u2", "next"),
            _turn("assistant", "a2", "u3", [{"type": "text", "text": "ok"}]),
        ],
    )
    (trace,), rejects, report = ingest_files("claude_code", [path])
    assert rejects == [] and report.ingested == 6
    assert [m.content for m in trace.messages] == ["fix it", "done", "next", "ok"]
    assert trace.metadata["compactions"] == [{"at_message": 2, "summary": "summary"}]


def test_hidden_reasoning_records_are_skipped_and_titles_kept(tmp_path):
    thinking = {"type": "thinking", "thinking": "", "signature": "EqQBCkYIBxgCKkDsig"}
    path = _write(
        tmp_path,
        [
            {"type": "summary", "summary": "an older session", "leafUuid": "gone"},
            {"type": "custom-title", "customTitle": "My title", "sessionId": "s1"},
            {"type": "permission-mode", "permissionMode": "default", "sessionId": "s1"},
            _turn("user", "u1", None, "hi"),
            _turn("assistant", "a1", "u1", [thinking], mid="m1"),
            _turn("assistant", "a2", "a1", [{"type": "redacted_thinking", "data": "x"}], mid="m1"),
            _turn("assistant", "a3", "a2", [{"type": "text", "text": "hello"}], mid="m1"),
            {"type": "made-up-kind", "sessionId": "s1"},
        ],
    )
    (trace,), rejects, report = ingest_files("claude_code", [path])
    assert [m.content for m in trace.messages] == ["hi", "hello"]
    assert trace.messages[1].reasoning is None
    assert report.skipped == {
        "encrypted reasoning": 2,
        "summary (other session)": 1,
        "ui state": 1,
    }
    assert trace.metadata["title"] == "My title" and 2 in trace.source_lines
    assert [(r.line, r.category) for r in rejects] == [(8, "unsupported")]
    assert balanced(report)


def test_a_call_without_result_in_the_middle_is_listed_not_unfinished(tmp_path):
    call = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}
    path = _write(
        tmp_path,
        [
            _turn("user", "u1", None, "list"),
            _turn("assistant", "a1", "u1", [call]),
            _turn("user", "u2", "a1", "[Request interrupted by user for tool use]"),
            _turn("assistant", "a2", "u2", [{"type": "text", "text": "stopped"}]),
        ],
    )
    (trace,), _, _ = ingest_files("claude_code", [path])
    assert trace.metadata["unanswered_calls"] == ["t1"]
    assert trace.metadata["unfinished"] is False


def test_bad_options_and_a_folder_are_refused(tmp_path):
    with pytest.raises(InputError, match="unknown option"):
        ingest_files("claude_code", [FIXTURE], {"colour": "red"})
    with pytest.raises(InputError, match="reasoning must be"):
        ingest_files("claude_code", [FIXTURE], {"reasoning": "maybe"})
    with pytest.raises(InputError, match="a folder; give its session files"):
        ingest_files("claude_code", [REAL])


# ---- no planted secret is written ---------------------------------------------------------------

PLACES = ["user", "text", "thinking", "tool_input", "tool_result", "cwd", "title"]


@st.composite
def planted_session(draw) -> tuple[list[dict], list[str]]:
    planted: dict[str, str] = {}
    materials: list[str] = []
    for place in draw(st.lists(st.sampled_from(PLACES), min_size=1, max_size=4, unique=True)):
        text, material = draw(secret())
        planted[place] = draw(SEP) + text + draw(SEP)
        materials.append(material or text.rsplit(" ", 1)[-1].split("=")[-1].strip())

    def at(place: str) -> str:
        return planted.get(place, place)

    blocks = [
        {"type": "thinking", "thinking": at("thinking"), "signature": "sig"},
        {"type": "text", "text": at("text")},
        {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": at("tool_input")}},
    ]
    records = [
        {"type": "custom-title", "customTitle": at("title"), "sessionId": "s1"},
        _turn("user", "u1", None, at("user"), cwd=at("cwd")),
        *(
            _turn("assistant", f"a{i}", "u1" if i == 0 else f"a{i - 1}", [b], mid="m1")
            for i, b in enumerate(blocks)
        ),
        _turn(
            "user",
            "u2",
            "a2",
            [{"type": "tool_result", "tool_use_id": "t1", "content": at("tool_result")}],
        ),
    ]
    return records, materials


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(planted_session())
def test_no_planted_secret_reaches_the_ingest_output(case) -> None:
    records, materials = case
    with tempfile.TemporaryDirectory() as tmp:
        src = _write(Path(tmp), records)
        out = Path(tmp) / "out" / "t.jsonl"
        assert_ingest_hides("claude_code", [src], out, materials)
