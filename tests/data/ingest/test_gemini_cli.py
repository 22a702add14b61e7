"""The `gemini_cli` ingester on real Gemini CLI sessions (tests/data/fixtures/gemini_cli/SOURCES.md:
a JSON session, a JSONL session log, and a `/chat save` checkpoint written from the CLI's
serializer) and on small hand-made sessions for the traps the real files do not show."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tuneloop.data.ingest.gemini_cli  # noqa: F401  (registers the ingester)
from tuneloop.data.ingest import ingest_files
from tuneloop.data.ingest.gemini_cli import (
    convert_log,
    convert_session,
    looks_like_gemini,
    result_text,
)
from tuneloop.errors import InputError

from ..test_secrets_never_written import SEP, secret
from .kit import assert_ingest_hides, assert_paired, ingest_one, n_calls

FIXTURES = Path(__file__).parents[1] / "fixtures"
HERE = FIXTURES / "gemini_cli"
JSON = HERE / "session-2025-12-01T21-45-5b959dae.json"
JSONL = HERE / "session-2026-04-23T12-52-0ab84937.jsonl"
CHECKPOINT = HERE / "checkpoint-cart-bug.json"


# ---- real files -----------------------------------------------------------------------------


def test_json_session_counts_thoughts_and_tokens():
    (trace,), rejects, report = ingest_one("gemini_cli", JSON)
    assert (report.lines_read, report.ingested, report.rejected, report.skipped) == (14, 14, 0, {})
    assert (len(trace.messages), n_calls(trace)) == (24, 10)
    assert trace.source_id == trace.metadata["session_id"] == "5b959dae-8655-4cd1-b10f-720b8c336ea2"
    assert trace.model == "gemini-3-pro-image-preview"
    assert (trace.started_at, trace.ended_at) == (
        "2025-12-01T21:45:34.362Z",
        "2025-12-01T21:50:10.837Z",
    )
    assert trace.metadata["tokens"] == {
        "input": 101630,
        "output": 2734,
        "cached": 56538,
        "thoughts": 1493,
        "tool": 0,
        "total": 105857,
    }
    hello = trace.messages[1]
    assert hello.content.startswith("Hello! I see we're all set up")
    assert hello.reasoning.startswith("**Assessing the Prompt's Intent**\n\n")
    three = trace.messages[15]  # one model turn with three calls, then their three results
    assert [c.name for c in three.tool_calls] == ["read_file", "write_file", "read_file"]
    assert [m.tool_call_id for m in trace.messages[16:19]] == [c.id for c in three.tool_calls]
    assert trace.messages[17].content.startswith("Successfully created and wrote to new file")
    assert json.loads(trace.messages[3].tool_calls[0].arguments) == {
        "dir_path": "/Users/Jane_Smith/Documents/projects/epm-cdme/assistants/"
    }
    assert_paired(trace, turns_close_calls=True)


def test_jsonl_session_replays_updates_and_skips_notices():
    (trace,), rejects, report = ingest_one("gemini_cli", JSONL)
    assert (report.lines_read, report.ingested, report.rejected) == (28, 9, 0)
    assert report.skipped == {
        "info message": 2,
        "metadata update": 11,
        "session metadata": 1,
        "superseded update": 5,
    }
    assert (len(trace.messages), n_calls(trace)) == (21, 12)
    # a message appended twice (text, then again with its tool calls): the later line is used
    assert trace.source_lines == [4, 8, 11, 14, 17, 18, 20, 22, 26]
    assert trace.metadata["models"] == ["gemini-3-flash-preview", "gemini-3.1-pro-preview"]
    assert trace.metadata["kind"] == "main" and trace.metadata["tokens"]["total"] == 206879
    first = trace.messages[1]
    assert [c.id for c in first.tool_calls] == [
        "b5qo7ls5",
        "aao1q07o",
        "fkoen8u1",
        "celsd0yz",
        "hfq6e93w",
    ]
    assert json.loads(first.tool_calls[1].arguments) == {"file_path": "README.md"}
    assert trace.messages[3].content.startswith('<div align="center" markdown="1">')
    said = trace.messages[13]  # text and a call in one model response: the text stays first
    assert said.content.startswith("我已經完成了對專案的深入分析")
    assert [c.name for c in said.tool_calls] == ["update_topic"]
    assert trace.messages[15].content == "System: Please continue."
    assert_paired(trace, turns_close_calls=True)


def test_checkpoint_written_from_the_cli_serializer():
    (trace,), rejects, report = ingest_one("gemini_cli", CHECKPOINT)
    assert (report.lines_read, report.ingested, report.rejected) == (6, 6, 0)
    assert (len(trace.messages), n_calls(trace)) == (7, 2)
    assert trace.source_id == "checkpoint-cart-bug" and trace.metadata["format"] == "checkpoint"
    assert trace.messages[1].content == "Got it. Thanks for the context!"
    assert trace.messages[5].content.endswith("Process Group PGID: 4121")
    assert_paired(trace, turns_close_calls=True)


def test_reasoning_drop_and_unknown_options():
    (trace,), _, _ = ingest_one("gemini_cli", JSON, reasoning="drop")
    assert len(trace.messages) == 24 and all(m.reasoning is None for m in trace.messages)
    with pytest.raises(InputError, match="unknown option"):
        ingest_files("gemini_cli", [JSON], {"thoughts": "drop"})


def test_detection_says_yes_to_gemini_files_and_no_to_every_other_fixture():
    assert all(looks_like_gemini(p) for p in (JSON, JSONL, CHECKPOINT))
    others = [p for p in FIXTURES.rglob("*") if p.is_file() and "gemini_cli" not in p.parts]
    assert others and not [p for p in others if looks_like_gemini(p)]


def test_another_format_makes_no_trace_and_every_line_a_reject():
    for other in (FIXTURES / "claude_code_session.jsonl", FIXTURES / "openai_proxy.jsonl"):
        traces, rejects, report = ingest_one("gemini_cli", other.with_suffix(".jsonl"))
        assert traces == [] and report.rejected == report.lines_read and not report.skipped


# ---- hand-made sessions ---------------------------------------------------------------------


def _gemini(mid: str, text: str = "", calls=(), **extra) -> dict:
    return {"id": mid, "type": "gemini", "content": text, "toolCalls": list(calls), **extra}


def _call(cid: str, output: str | None = "ok", status: str = "success") -> dict:
    result = [{"functionResponse": {"id": cid, "name": "run", "response": {"output": output}}}]
    return {
        "id": cid,
        "name": "run",
        "args": {"x": 1},
        "result": result if output else None,
        "status": status,
    }


def test_a_rewind_drops_the_rewound_messages_and_set_messages_replaces_them():
    header = {"sessionId": "s1", "projectHash": "h", "startTime": "t0"}
    lines = [
        header,
        {"id": "u1", "type": "user", "content": [{"text": "first"}]},
        _gemini("g1", "one"),
        {"id": "u2", "type": "user", "content": [{"text": "second"}]},
        _gemini("g2", "two"),
        {"$rewindTo": "u2"},
        {"id": "u3", "type": "user", "content": [{"text": "second, better"}]},
        {"$set": {"lastUpdated": "t9", "summary": "demo"}},
        {"oops": True},
    ]
    parsed = convert_log("s.jsonl", list(enumerate(lines, start=1)))
    (trace,) = parsed.traces
    assert [m.content for m in trace.messages] == ["first", "one", "second, better"]
    assert [(r.line, r.category) for r in parsed.rejects] == [
        (9, "malformed"),
        (4, "dropped"),
        (5, "dropped"),
    ]
    assert parsed.skipped == {"session metadata": 1, "rewind marker": 1, "metadata update": 1}
    assert (trace.ended_at, trace.metadata["summary"]) == ("t9", "demo")
    checkpointed = convert_log(
        "s.jsonl",
        list(
            enumerate(
                [*lines[:3], {"$set": {"messages": [lines[1], _gemini("g1", "one, masked")]}}],
                start=1,
            )
        ),
    )
    assert [m.content for m in checkpointed.traces[0].messages] == ["first", "one, masked"]
    assert checkpointed.skipped == {"session metadata": 1, "superseded update": 2}


def test_tool_results_repeated_as_a_user_turn_errors_and_unanswered_calls():
    doc = {
        "sessionId": "s2",
        "projectHash": "h",
        "messages": [
            {"id": "u", "type": "user", "content": "go"},
            _gemini(
                "g", "", [_call("c1"), _call("c2", None, "error"), _call("c3", None, "executing")]
            ),
            {
                "id": "r",
                "type": "user",
                "content": [
                    {"functionResponse": {"id": "c1", "name": "run", "response": {"output": "ok"}}}
                ],
            },
            {"id": "i", "type": "info", "content": "Request cancelled."},
            {"id": "w", "type": "mystery", "content": "?"},
            _gemini("e", ""),
        ],
    }
    parsed = convert_session("s.json", doc)
    (trace,) = parsed.traces
    assert [m.role for m in trace.messages] == ["user", "assistant", "tool", "tool"]
    assert (trace.messages[3].content, trace.messages[3].is_error) == ("[error]", True)
    assert trace.metadata["unanswered_calls"] == ["c3"]
    assert parsed.skipped == {"duplicate tool result": 1, "info message": 1, "empty reply": 1}
    assert [(r.line, r.category) for r in parsed.rejects] == [(5, "unsupported")]


def test_checkpoint_results_without_ids_answer_the_oldest_call_of_their_name():
    history = [
        {"role": "user", "parts": [{"text": "look"}]},
        {
            "role": "model",
            "parts": [
                {"text": "thinking", "thought": True},
                {"functionCall": {"name": "ls", "args": {}}},
                {"functionCall": {"name": "ls", "args": {"d": "b"}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "ls", "response": {"output": "a"}}},
                {"functionResponse": {"name": "ls", "response": {"error": "no b"}}},
            ],
        },
        {"role": "system", "parts": []},
    ]
    parsed = convert_session("checkpoint-x.json", history)
    (trace,) = parsed.traces
    call_ids = [c.id for c in trace.messages[1].tool_calls]
    assert trace.messages[1].reasoning == "thinking"
    assert [(m.tool_call_id, m.content) for m in trace.messages[2:]] == list(
        zip(call_ids, ["a", "no b"], strict=True)
    )
    assert [(r.line, r.category) for r in parsed.rejects] == [(4, "malformed")]


def test_result_shapes():
    assert result_text([{"functionResponse": {"response": {"output": "x"}}}]) == "x"
    assert (
        result_text([{"functionResponse": {"response": {"llmContent": 1}}}]) == '{"llmContent": 1}'
    )
    assert (
        result_text([{"inlineData": {"mimeType": "image/png", "data": "…"}}, {"text": "t"}])
        == "[image]\nt"
    )
    assert result_text("plain") == "plain"


def test_bad_files_name_themselves(tmp_path):
    truncated = tmp_path / "session-1.json"
    truncated.write_text('{"sessionId": "s", "projectHash": "h", "messages": [')
    with pytest.raises(InputError, match="session-1.json"):
        ingest_files("gemini_cli", [truncated])
    other = tmp_path / "other.json"
    other.write_text('{"hello": 1}')
    with pytest.raises(InputError, match="not a Gemini CLI session"):
        ingest_files("gemini_cli", [other])
    with pytest.raises(InputError, match="is a folder"):
        ingest_files("gemini_cli", [tmp_path])


# ---- no planted secret reaches the output ---------------------------------------------------

PLACES = ["user", "gemini", "args", "output", "thought", "summary"]


@st.composite
def session(draw) -> tuple[dict, list[str]]:
    planted, materials = {}, []
    for place in draw(st.lists(st.sampled_from(PLACES), min_size=1, max_size=4, unique=True)):
        text, material = draw(secret())
        planted[place] = draw(SEP) + text + draw(SEP)
        materials.append(material or text.rsplit(" ", 1)[-1].split("=")[-1].strip())
    at = planted.get
    call = _call("c1", at("output", "ok"))
    call["args"] = {"command": at("args", "ls")}
    thoughts = [{"subject": "Plan", "description": at("thought", "d"), "timestamp": "t"}]
    doc = {
        "sessionId": "s3",
        "projectHash": "h",
        "summary": at("summary", "s"),
        "messages": [
            {"id": "u", "type": "user", "content": [{"text": "do " + at("user", "it")}]},
            _gemini("g", "on it " + at("gemini", ""), [call], thoughts=thoughts),
        ],
    }
    return doc, materials


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session(), st.booleans())
def test_no_planted_secret_reaches_the_ingest_output(case, as_log):
    doc, materials = case
    with tempfile.TemporaryDirectory() as tmp:
        if as_log:  # the same session as the newer CLIs write it
            src = Path(tmp) / "session-x.jsonl"
            head = {k: v for k, v in doc.items() if k != "messages"}
            src.write_text("".join(json.dumps(r) + "\n" for r in [head, *doc["messages"]]))
        else:
            src = Path(tmp) / "session-x.json"
            src.write_text(json.dumps(doc, indent=2))
        out = Path(tmp) / "out" / "traces.jsonl"
        assert_ingest_hides("gemini_cli", [src], out, materials)


# ---- any log of records: no crash, every record accounted for once ---------------------------

IDS = st.sampled_from(["u1", "g1", "g2"])
PART = st.one_of(
    st.sampled_from([7, None, "raw", {"weird": 1}, {"inlineData": {"mimeType": "image/png"}}]),
    st.fixed_dictionaries({"text": st.sampled_from(["", "a", "b"])}),
    st.fixed_dictionaries(
        {
            "functionResponse": st.fixed_dictionaries(
                {
                    "id": st.sampled_from(["c1", "c9"]),
                    "name": st.just("run"),
                    "response": st.just({"output": "o"}),
                }
            )
        }
    ),
)
MESSAGE = st.fixed_dictionaries(
    {"id": IDS, "type": st.sampled_from(["user", "gemini", "info", "odd"])},
    optional={
        "content": st.one_of(st.sampled_from(["", "text"]), st.lists(PART, max_size=2)),
        "toolCalls": st.lists(
            st.sampled_from([_call("c1"), _call("c2", None, "error"), _call("c3", None)]),
            max_size=2,
        ),
        "thoughts": st.just([{"subject": "s", "description": "d"}]),
        "tokens": st.just({"input": 1, "total": 2}),
    },
)
LOG_RECORD = st.one_of(
    MESSAGE,
    st.builds(lambda i: {"$rewindTo": i}, IDS),
    st.builds(lambda ms: {"$set": {"messages": ms}}, st.lists(MESSAGE, max_size=2)),
    st.just({"$set": {"lastUpdated": "t"}}),
    st.just({"sessionId": "s", "projectHash": "h"}),
    st.just({"something": "else"}),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(LOG_RECORD, max_size=12), st.booleans())
def test_every_record_ends_in_exactly_one_place(records, keep):
    parsed = convert_log("s.jsonl", list(enumerate(records, start=1)), keep)
    merged = {n for t in parsed.traces for n in t.source_lines}
    rejected = {r.line for r in parsed.rejects}
    assert not merged & rejected
    assert len(merged) + len(rejected) + sum(parsed.skipped.values()) == len(records)
