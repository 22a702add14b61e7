"""The `codex_cli` ingester on real Codex CLI rollouts (tests/data/fixtures/codex_cli/SOURCES.md)
and on small hand-made rollouts for the traps the real files do not show."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tuneloop.data.ingest.codex_cli  # noqa: F401  (registers the ingester)
from tuneloop.data.ingest import ingest_files
from tuneloop.data.ingest.codex_cli import convert_rollout, looks_like_codex_rollout, output_text
from tuneloop.errors import InputError

from ..test_secrets_never_written import SEP, secret
from .kit import assert_ingest_hides, assert_paired, ingest_one, n_calls

FIXTURES = Path(__file__).parents[1] / "fixtures"
OLD = (
    FIXTURES
    / "codex_cli"
    / "rollout-2025-09-19T17-02-12-01996135-afde-7911-97f0-d863511eca56.jsonl"
)
NEW = (
    FIXTURES
    / "codex_cli"
    / "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl"
)


# ---- real rollouts --------------------------------------------------------------------------


def test_codex_039_rollout_counts():
    (trace,), rejects, report = ingest_one("codex_cli", OLD)
    assert (report.lines_read, report.ingested, report.rejected) == (106, 47, 0)
    assert report.skipped == {
        "duplicate event": 10,
        "empty reasoning": 10,
        "session_meta": 1,
        "token count": 19,
        "turn_context": 19,
    }
    assert (len(trace.messages), n_calls(trace)) == (39, 18)
    assert [m.role for m in trace.messages].count("tool") == 18
    assert trace.source_id == trace.metadata["session_id"] == "01996135-afde-7911-97f0-d863511eca56"
    assert trace.model == "aide-gpt-5" and trace.metadata["cli_version"] == "0.39.0"
    assert (trace.started_at, trace.ended_at) == (
        "2025-09-19T09:02:12.446Z",
        "2025-09-19T09:09:18.355Z",
    )
    assert trace.metadata["tokens"]["total_tokens"] == 283081
    assert_paired(trace, turns_close_calls=True)


def test_codex_039_json_string_outputs_are_decoded_and_calls_join_their_message():
    (trace,), _, _ = ingest_one("codex_cli", OLD)
    plan = trace.messages[2]  # the assistant's text and its update_plan call: one model step
    assert plan.content.startswith("I’ll scan the repo for go.mod")
    assert [(c.name, c.id) for c in plan.tool_calls] == [
        ("update_plan", "call_YYYpMp6f7qUz3cF3JCq2w2Ni")
    ]
    assert trace.messages[3].content == "Plan updated"
    ls = trace.messages[5]  # the shell output was '{"output": "total 124...", "metadata": ...}'
    assert ls.tool_call_id == "call_pEqHamKTEvL6ofrtlsNEi8dt"
    assert ls.content.startswith("total 124\n") and ls.is_error is None
    assert json.loads(trace.messages[4].tool_calls[0].arguments) == {
        "command": ["bash", "-lc", "ls -la"]
    }
    assert trace.messages[-1].content.startswith("Here’s what I changed and what I found.")


def test_codex_0125_rollout_counts_parallel_calls_and_encrypted_reasoning():
    (trace,), rejects, report = ingest_one("codex_cli", NEW)
    assert (report.lines_read, report.ingested, report.rejected) == (60, 31, 0)
    assert report.skipped == {
        "duplicate event": 10,
        "encrypted reasoning": 4,
        "session_meta": 1,
        "token count": 9,
        "turn marker": 3,
        "turn_context": 2,
    }
    assert (len(trace.messages), n_calls(trace)) == (25, 12)
    assert trace.model == "gpt-5.5" and trace.metadata["base_instructions_chars"] == 21335
    assert trace.messages[0].role == "system"  # the developer message
    assert trace.messages[2].content == "show tools"
    parallel = trace.messages[17]  # three exec_command calls, then their three outputs
    assert [c.id for c in parallel.tool_calls] == [
        "call_7mOONLaQ5ZL02RB1TWn4Tbg3",
        "call_3mllFFlmUtgQreN47o2tCdF3",
        "call_jQYxA5wvjWJ4ZtptybmzrkNm",
    ]
    assert [m.tool_call_id for m in trace.messages[18:21]] == [c.id for c in parallel.tool_calls]
    assert_paired(trace, turns_close_calls=True)
    assert all(m.reasoning is None for m in trace.messages)  # every reasoning was encrypted
    assert "gAAAAA" not in trace.model_dump_json()


def test_reasoning_drop_and_unknown_options():
    (trace,), _, report = ingest_one("codex_cli", OLD, reasoning="drop")
    assert len(trace.messages) == 39
    with pytest.raises(InputError, match="unknown option"):
        ingest_files("codex_cli", [OLD], {"sidechains": "drop"})
    with pytest.raises(InputError, match="keep' or 'drop"):
        ingest_files("codex_cli", [OLD], {"reasoning": "maybe"})


def test_detection_says_yes_to_rollouts_and_no_to_every_other_fixture():
    assert looks_like_codex_rollout(OLD) and looks_like_codex_rollout(NEW)
    others = [p for p in FIXTURES.rglob("*") if p.is_file() and "codex_cli" not in p.parts]
    assert others and not [p for p in others if looks_like_codex_rollout(p)]


def test_another_format_makes_no_trace_and_every_line_a_reject():
    other = FIXTURES / "gemini_cli" / "session-2026-04-23T12-52-0ab84937.jsonl"
    traces, rejects, report = ingest_one("codex_cli", other)
    assert traces == [] and report.rejected == report.lines_read == 28
    assert rejects[0].reason == "record type None is not a rollout item"


# ---- hand-made rollouts: the traps the real files above do not show --------------------------


def _line(kind: str, **payload) -> dict:
    return {"timestamp": "2026-01-01T00:00:00Z", "type": kind, "payload": payload}


def _msg(role: str, text: str) -> dict:
    part = "output_text" if role == "assistant" else "input_text"
    return _line("response_item", type="message", role=role, content=[{"type": part, "text": text}])


def _convert(*records: dict, keep: bool = True):
    return convert_rollout("r.jsonl", list(enumerate(records, start=1)), keep)


def test_events_are_kept_when_no_response_item_carries_their_text():
    parsed = _convert(
        _line("session_meta", id="s1", timestamp="2026-01-01T00:00:00Z"),
        _line("event_msg", type="user_message", message="fix the build"),
        _msg("assistant", "done"),
        _line("event_msg", type="agent_message", message="done"),
    )
    (trace,) = parsed.traces
    assert [(m.role, m.content) for m in trace.messages] == [
        ("user", "fix the build"),
        ("assistant", "done"),
    ]
    assert parsed.skipped == {"session_meta": 1, "duplicate event": 1}
    assert trace.source_lines == [2, 3]


def test_summary_reasoning_is_kept_but_never_the_encrypted_blob():
    parsed = _convert(
        _msg("user", "hi"),
        _line(
            "response_item",
            type="reasoning",
            summary=[{"type": "summary_text", "text": "**Greeting**"}],
            encrypted_content="gAAAAABsecretblob",
        ),
        _line("event_msg", type="agent_reasoning", text="**Greeting**"),
        _msg("assistant", "hello"),
    )
    (trace,) = parsed.traces
    assert trace.messages[1].reasoning == "**Greeting**"
    assert "gAAAAABsecretblob" not in trace.model_dump_json()
    assert parsed.skipped == {"duplicate event": 1} and trace.source_lines == [1, 2, 4]
    dropped = _convert(
        *[_msg("user", "hi"), _line("response_item", type="reasoning", summary=[{"text": "x"}])],
        keep=False,
    )
    assert dropped.skipped == {"reasoning (option reasoning: drop)": 1}


def test_custom_and_local_shell_calls_and_failed_outputs():
    parsed = _convert(
        _msg("user", "patch it"),
        _line(
            "response_item",
            type="custom_tool_call",
            name="apply_patch",
            input="*** Begin Patch",
            call_id="c1",
        ),
        _line(
            "response_item",
            type="local_shell_call",
            call_id="c2",
            status="completed",
            action={"type": "exec", "command": ["ls"]},
        ),
        _line("response_item", type="custom_tool_call_output", call_id="c1", output="Done!"),
        _line(
            "response_item",
            type="function_call_output",
            call_id="c2",
            output=json.dumps({"output": "ls: no such file", "metadata": {"exit_code": 2}}),
        ),
        _line("event_msg", type="patch_apply_end", call_id="c1", success=True),
        _line("response_item", type="function_call_output", call_id="nope", output="?"),
    )
    (trace,) = parsed.traces
    calls = trace.messages[1].tool_calls
    assert json.loads(calls[0].arguments) == {"input": "*** Begin Patch"}
    assert (calls[1].name, json.loads(calls[1].arguments)["command"]) == ("local_shell", ["ls"])
    assert (trace.messages[3].content, trace.messages[3].is_error) == ("ls: no such file", True)
    assert parsed.skipped == {"duplicate event": 1}
    (bad,) = parsed.rejects
    assert (bad.line, bad.category) == (7, "malformed") and "nope" in bad.reason


def test_output_shapes():
    assert output_text("plain") == ("plain", None)
    assert output_text('{"not": "an output"}') == ('{"not": "an output"}', None)
    assert output_text('{"output": "ok", "metadata": {"exit_code": 0}}') == ("ok", None)
    assert output_text(
        [{"type": "input_text", "text": "a"}, {"type": "input_image", "image_url": "data:"}]
    ) == ("a\n[image]", None)
    assert output_text({"content": "denied", "success": False}) == ("denied", True)


def test_a_rollback_drops_the_undone_turns():
    parsed = _convert(
        _msg("user", "<environment_context>cwd</environment_context>"),
        _msg("user", "first"),
        _msg("assistant", "one"),
        _msg("user", "second"),
        _line("response_item", type="function_call", name="shell", arguments="{}", call_id="c9"),
        _line("response_item", type="function_call_output", call_id="c9", output="x"),
        _line("event_msg", type="thread_rolled_back", num_turns=1),
        _msg("user", "second, again"),
        _msg("assistant", "two"),
    )
    (trace,) = parsed.traces
    assert [m.content for m in trace.messages][1:] == ["first", "one", "second, again", "two"]
    assert sorted(r.line for r in parsed.rejects) == [4, 5, 6]
    assert {r.category for r in parsed.rejects} == {"dropped"}
    assert parsed.skipped == {"rollback marker": 1}


def test_unknown_records_are_rejected_by_name_and_hosted_calls_skipped():
    parsed = _convert(
        _msg("user", "search"),
        _line(
            "response_item",
            type="web_search_call",
            status="completed",
            action={"type": "search", "query": "go release"},
        ),
        _line("response_item", type="brand_new_item"),
        _line("event_msg", type="brand_new_event"),
        {"type": "something_else", "payload": {}},
        _line("compacted", message="summary of the work so far"),
    )
    (trace,) = parsed.traces
    assert trace.metadata["web_searches"] == ["go release"]
    assert trace.metadata["compactions"] == [
        {"at_message": 1, "summary": "summary of the work so far"}
    ]
    assert [(r.line, r.category) for r in parsed.rejects] == [
        (3, "unsupported"),
        (4, "unsupported"),
        (5, "malformed"),
    ]
    assert parsed.skipped == {"hosted tool call": 1, "compaction": 1}


def test_bad_lines_are_rejected_with_their_line_and_folders_refused(tmp_path):
    path = tmp_path / "rollout.jsonl"
    good = json.dumps(_msg("user", "hi"))
    path.write_text(good + "\n{not json\n\n" + json.dumps(_msg("assistant", "yo")) + "\n")
    (trace,), rejects, report = ingest_one("codex_cli", path)
    assert (report.lines_read, report.ingested, report.rejected) == (3, 2, 1)
    assert rejects[0].line == 2 and "invalid JSON" in rejects[0].reason
    with pytest.raises(InputError, match="is a folder"):
        ingest_files("codex_cli", [tmp_path])


# ---- no planted secret reaches the output ---------------------------------------------------

PLACES = ["user", "assistant", "arguments", "output", "reasoning", "cwd", "event"]


@st.composite
def rollout(draw) -> tuple[list[dict], list[str]]:
    planted, materials = {}, []
    for place in draw(st.lists(st.sampled_from(PLACES), min_size=1, max_size=4, unique=True)):
        text, material = draw(secret())
        planted[place] = draw(SEP) + text + draw(SEP)
        materials.append(material or text.rsplit(" ", 1)[-1].split("=")[-1].strip())
    at = planted.get
    records = [
        _line("session_meta", id="s1", cwd=at("cwd", "/repo"), timestamp="2026-01-01T00:00:00Z"),
        _msg("user", "task " + at("user", "go")),
        _line("event_msg", type="user_message", message="task " + at("event", "go")),
        _line(
            "response_item",
            type="reasoning",
            summary=[{"type": "summary_text", "text": at("reasoning", "r")}],
        ),
        _line(
            "response_item",
            type="function_call",
            name="shell",
            arguments=json.dumps({"cmd": at("arguments", "ls")}),
            call_id="c1",
        ),
        _line(
            "response_item",
            type="function_call_output",
            call_id="c1",
            output=json.dumps({"output": at("output", "ok")}),
        ),
        _msg("assistant", "done " + at("assistant", "")),
    ]
    return records, materials


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rollout())
def test_no_planted_secret_reaches_the_ingest_output(case):
    records, materials = case
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "rollout-x.jsonl", Path(tmp) / "out" / "traces.jsonl"
        src.write_text("".join(json.dumps(r) + "\n" for r in records))
        assert_ingest_hides("codex_cli", [src], out, materials)


# ---- any sequence of records: no crash, every line accounted for once -----------------------

JSON_OUT = '{"output": "o", "metadata": {"exit_code": 1}}'
TEXT = st.sampled_from(["", "hi", "done", "<environment_context>x", "**R**"])
PAYLOAD = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(
            ["message", "function_call", "custom_tool_call", "local_shell_call", "reasoning"]
            + ["function_call_output", "custom_tool_call_output", "web_search_call", "x"]
            + ["user_message", "agent_message", "agent_reasoning", "exec_command_end"]
            + ["token_count", "thread_rolled_back", "turn_aborted", "task_started"]
        ),
        "role": st.sampled_from(["user", "assistant", "developer", "tool"]),
        "content": st.one_of(
            st.sampled_from([None, "s", 5, {"a": 1}, [7, {"type": "input_image"}]]),
            st.lists(st.fixed_dictionaries({"text": TEXT}), max_size=2),
        ),
        "summary": st.lists(st.fixed_dictionaries({"text": TEXT}), max_size=2),
        "encrypted_content": st.sampled_from([None, "gAAAA"]),
        "call_id": st.sampled_from(["c1", "c2", None, 5]),
        "name": st.sampled_from(["shell", "apply_patch"]),
        "arguments": st.sampled_from(["{}", '{"a": 1}']),
        "output": st.one_of(TEXT, st.sampled_from([JSON_OUT, 3, [1], {"content": 1}])),
        "message": TEXT,
        "text": TEXT,
        "num_turns": st.integers(-1, 3),
        "id": st.sampled_from(["s1", "s2"]),
        "model": st.sampled_from(["m1", "m2"]),
    },
)
RECORD = st.fixed_dictionaries(
    {"type": st.sampled_from(["session_meta", "turn_context", "response_item", "event_msg"])},
    optional={"payload": PAYLOAD, "timestamp": st.just("2026-01-01T00:00:00Z")},
)


@settings(max_examples=200, deadline=None)
@given(st.lists(RECORD, max_size=14), st.booleans())
def test_every_record_ends_in_exactly_one_place(records, keep):
    parsed = _convert(*records, keep=keep)
    merged = {n for t in parsed.traces for n in t.source_lines}
    rejected = {r.line for r in parsed.rejects}
    assert not merged & rejected
    assert len(merged) + len(rejected) + sum(parsed.skipped.values()) == len(records)
    for trace in parsed.traces:
        assert "gAAAA" not in trace.model_dump_json()
