"""The `openhands` ingester on real OpenHands files (tests/data/fixtures/openhands/SOURCES.md):
trajectory JSON and SDK conversation folders; edge cases on events written as OpenHands'
serializers write them."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import tuneloop.data.ingest.openhands  # noqa: F401  (registers the ingester)
from tuneloop.cli import build_app
from tuneloop.data.ingest import detect_format, ingest_files
from tuneloop.data.ingest.openhands import looks_like_openhands
from tuneloop.errors import InputError

from .kit import assert_paired, ingest_one, n_calls

FIXTURES = Path(__file__).parents[1] / "fixtures"
OH = FIXTURES / "openhands"
GUI = OH / "v0" / "basic_gui_mode.json"
CHAT = OH / "v0" / "basic_interactions.json"
RENAME = OH / "v0" / "wrong_initial_state.json"
PWD = OH / "sdk" / "cd94562403b9487ebdd4018e3f531dfd"
PROBE = OH / "sdk" / "3fdb316098bb48e1aa029ce56805792a"


def roles(trace) -> Counter:
    return Counter(m.role for m in trace.messages)


# ---- real fixtures: counts per file ------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "records", "messages", "calls", "skipped"),
    [
        (
            GUI,
            18,
            {"user": 1, "assistant": 5, "tool": 4},
            4,
            {"agent state": 5, "empty observation": 3},
        ),
        (CHAT, 6, {"user": 3, "assistant": 3}, 1, {}),
        (RENAME, 8, {"user": 1, "assistant": 4, "tool": 3}, 4, {}),
        (PWD, 8, {"system": 1, "user": 2, "assistant": 3, "tool": 2}, 2, {}),
        (PROBE, 11, {"system": 1, "user": 3, "assistant": 3, "tool": 3}, 3, {}),
    ],
    ids=["gui_mode", "interactions", "rename", "sdk_pwd", "sdk_prompt_update"],
)
def test_real_fixture_counts(source, records, messages, calls, skipped):
    traces, rejects, report = ingest_one("openhands", source)
    assert report.lines_read == records and report.rejected == 0 and not rejects
    assert dict(report.skipped) == skipped
    (trace,) = traces
    assert dict(roles(trace)) == messages
    assert n_calls(trace) == calls
    assert_paired(trace)
    assert trace.source == "openhands" and trace.metadata["session_id"] == trace.source_id


def test_trajectory_turns_by_hand():
    (trace,), _, _ = ingest_one("openhands", GUI)
    assert trace.model == "claude-3-5-sonnet-20241022"
    assert trace.started_at == "2025-01-20T20:29:32.262843"  # the first event kept, not a skip
    first, call = trace.messages[0], trace.messages[1]
    assert first.role == "user" and first.content.startswith("I want to create a VueJS app")
    # the assistant turn is the model response (text + tool call), from the action's metadata
    assert call.content.startswith("I'll help you create a Vue.js application")
    assert [(c.id, c.name) for c in call.tool_calls] == [
        ("toolu_01W9Z8jBctr8X2frZV9p1RYs", "execute_bash")
    ]
    assert json.loads(call.tool_calls[0].arguments) == {"command": "mkdir -p /workspace/todo-app"}
    # the observation is the tool result, rendered with its suffix as the model saw it
    result = trace.messages[2]
    assert result.tool_call_id == "toolu_01W9Z8jBctr8X2frZV9p1RYs"
    assert result.content == "\n[The command completed with exit code 0.]"
    assert result.name == "execute_bash"
    # the copy of each model response on its observation made no second message
    assert trace.metadata["model_response_copies"] == 4
    assert trace.messages[-1].content.startswith("I've created a complete Vue.js todo application")


def test_finish_keeps_the_models_tool_call():
    (trace,), _, _ = ingest_one("openhands", CHAT)
    assert [m.content for m in trace.messages[:2]] == ["what's 1+1?", "1 + 1 equals 2."]
    last = trace.messages[-1]
    assert last.role == "assistant" and last.content is None
    assert [(c.id, c.name, c.arguments) for c in last.tool_calls] == [
        ("call_IpyczPgEAwtpRWFZ2RNokTdH", "finish", "{}")
    ]
    assert trace.model == "gpt-4o-2024-08-06"


def test_sdk_folder_by_hand():
    (trace,), _, _ = ingest_one("openhands", PWD)
    assert trace.source_id == "cd945624-03b9-487e-bdd4-018e3f531dfd"
    assert trace.model == "openai/gpt-4o-mini"
    assert trace.messages[0].role == "system"
    assert trace.messages[0].content.startswith("You are OpenHands agent")
    assert trace.metadata["tool_names"] == ["terminal", "finish", "think"]
    call = trace.messages[2].tool_calls[0]
    assert (call.id, call.name) == ("call_KaQ0kUcBb5tbMzhxbIx9dvoZ", "terminal")
    assert json.loads(call.arguments)["command"] == "pwd > tool_output.txt"
    assert trace.messages[3].tool_call_id == call.id and trace.messages[3].content == ""
    assert trace.messages[5].content == "The current directory has been written to tool_output.txt."
    assert trace.messages[-1].content.startswith("I executed the `pwd` command")
    assert trace.metadata["cost_usd"] == pytest.approx(0.00122745)
    assert trace.source_lines == list(range(1, 9))
    # the events folder itself is the same conversation
    (again,), _, _ = ingest_one("openhands", PWD / "events")
    assert again.messages == trace.messages and again.source_id == trace.source_id


def test_latest_system_prompt_wins_and_the_replaced_one_is_kept():
    (trace,), _, _ = ingest_one("openhands", PROBE)
    assert [m.role for m in trace.messages].count("system") == 1
    assert trace.messages[0].content == "You are a helpful assistant for this probe test."
    assert trace.metadata["tool_names"] == ["file_editor", "terminal", "finish", "think"]
    (old,) = trace.metadata["superseded_system_prompts"]
    assert old["record"] == 1 and old["tools"] == ["file_editor", "finish", "think"]
    assert 5 in trace.source_lines  # the update event (record 5) is merged


# ---- detection ---------------------------------------------------------------------------------


def test_detects_its_files_and_folders_only():
    for source in (GUI, CHAT, RENAME, PWD, PWD / "events", PROBE):
        assert looks_like_openhands(source), source
        assert detect_format(source) == "openhands", source
    others = [
        p
        for p in FIXTURES.rglob("*")
        if p.is_file() and OH not in p.parents and not p.name.startswith(".")
    ]
    assert others  # the other formats' fixtures
    for path in others:
        assert not looks_like_openhands(path), path
    assert not looks_like_openhands(PWD / "base_state.json")


# ---- edge cases, events as OpenHands' serializers write them -----------------------------------


def _response(rid: str, calls: list[tuple[str, str, dict]], text: str | None = None) -> dict:
    return {
        "id": rid,
        "model": "m-1",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": text,
                    "reasoning_content": "think first",
                    "thinking_blocks": [{"type": "redacted_thinking", "data": "opaque"}],
                    "tool_calls": [
                        {
                            "id": i,
                            "type": "function",
                            "function": {"name": n, "arguments": json.dumps(a)},
                        }
                        for i, n, a in calls
                    ],
                },
            }
        ],
    }


def _meta(call_id: str, name: str, response: dict) -> dict:
    return {"function_name": name, "tool_call_id": call_id, "model_response": response}


def _trajectory() -> list:
    both = _response(
        "r1",
        [("c1", "execute_bash", {"command": "ls"}), ("c2", "think", {"thought": "t"})],
        "Two at once.",
    )
    return [
        {
            "id": 0,
            "source": "agent",
            "action": "system",
            "args": {
                "content": "SYS",
                "tools": [{"type": "function", "function": {"name": "execute_bash"}}],
            },
        },
        {
            "id": 1,
            "source": "user",
            "action": "message",
            "args": {"content": "hi", "image_urls": ["data:x"]},
        },
        {"id": 2, "source": "user", "action": "recall", "args": {"query": "hi"}},
        {
            "id": 3,
            "source": "agent",
            "action": "run",
            "args": {"command": "ls"},
            "tool_call_metadata": _meta("c1", "execute_bash", both),
        },
        {
            "id": 4,
            "source": "agent",
            "action": "think",
            "args": {"thought": "t"},
            "tool_call_metadata": _meta("c2", "think", both),
        },
        {
            "id": 5,
            "source": "agent",
            "cause": 3,
            "observation": "run",
            "content": "a.txt",
            "extras": {"metadata": {"suffix": "\n[exit 0]"}},
            "tool_call_metadata": _meta("c1", "execute_bash", both),
        },
        {
            "id": 6,
            "source": "agent",
            "cause": 4,
            "observation": "think",
            "content": "Your thought has been logged.",
            "tool_call_metadata": _meta("c2", "think", both),
        },
        {"id": 6, "source": "agent", "cause": 4, "observation": "think", "content": "again"},
        {
            "id": 7,
            "source": "agent",
            "action": "read",
            "args": {"path": "a.txt", "thought": "Old style."},
        },
        {"id": 8, "source": "agent", "cause": 7, "observation": "error", "content": "no such file"},
        "not an event",
        {"id": 9, "source": "agent", "message": "neither"},
        {
            "id": 10,
            "source": "agent",
            "action": "message",
            "args": {"content": "Done."},
            "llm_metrics": {"accumulated_cost": 0.5},
        },
    ]


def test_parallel_calls_share_one_message_and_old_actions_get_synthetic_ids(tmp_path):
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps({"id": "sess-1", "trajectory": _trajectory()}))
    (trace,), rejects, report = ingest_one("openhands", path)
    assert trace.source_id == "sess-1" and trace.model == "m-1"
    assert [m.role for m in trace.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert trace.messages[1].content == "hi\n[image]"
    both = trace.messages[2]
    assert [c.id for c in both.tool_calls] == ["c1", "c2"] and both.reasoning == "think first"
    assert trace.messages[3].content == "a.txt\n[exit 0]"
    old = trace.messages[5]
    assert (old.content, old.tool_calls[0].id, old.tool_calls[0].name) == (
        "Old style.",
        "event-7",
        "read",
    )
    assert json.loads(old.tool_calls[0].arguments) == {"path": "a.txt"}
    assert trace.messages[6].tool_call_id == "event-7" and trace.messages[6].is_error is True
    assert trace.metadata["tools"][0]["function"]["name"] == "execute_bash"
    assert trace.metadata["cost_usd"] == 0.5
    assert trace.metadata["model_response_copies"] == 3  # the second action + two observations
    assert trace.metadata["skipped_blocks"] == {"encrypted reasoning": 1}
    assert "opaque" not in trace.model_dump_json()
    assert dict(report.skipped) == {"recall": 1, "duplicate event": 1}
    assert {(r.line, r.category) for r in rejects} == {(11, "malformed"), (12, "malformed")}
    assert_paired(trace)
    (dropped,), _, _ = ingest_one("openhands", path, reasoning="drop")
    assert dropped.messages[2].reasoning is None


def _event_file(folder: Path, idx: int, event: dict) -> None:
    (folder / f"event-{idx:05d}-{event['id']}.json").write_text(json.dumps(event))


def _tc(call_id: str, name: str) -> dict:
    return {"id": call_id, "name": name, "arguments": json.dumps({"command": call_id})}


def _sdk_events() -> list[dict]:
    return [
        {
            "id": "e0000000-0",
            "kind": "SystemPromptEvent",
            "source": "agent",
            "system_prompt": {"type": "text", "text": "SYS"},
            "dynamic_context": {"type": "text", "text": "CTX"},
            "tools": [{"title": "terminal"}],
        },
        {
            "id": "e0000000-1",
            "kind": "MessageEvent",
            "source": "user",
            "llm_message": {"role": "user", "content": [{"type": "text", "text": "go"}]},
            "extended_content": [{"type": "text", "text": "<skill/>"}],
        },
        {
            "id": "e0000000-2",
            "kind": "ActionEvent",
            "source": "agent",
            "thought": [{"type": "text", "text": "Both."}],
            "thinking_blocks": [{"type": "redacted_thinking", "data": "xx"}],
            "tool_call": _tc("a", "terminal"),
            "tool_call_id": "a",
            "tool_name": "terminal",
            "llm_response_id": "R",
        },
        {
            "id": "e0000000-3",
            "kind": "ActionEvent",
            "source": "agent",
            "thought": [],
            "tool_call": _tc("b", "terminal"),
            "tool_call_id": "b",
            "tool_name": "terminal",
            "llm_response_id": "R",
        },
        {
            "id": "e0000000-4",
            "kind": "ObservationEvent",
            "source": "environment",
            "tool_call_id": "a",
            "tool_name": "terminal",
            "action_id": "e0000000-2",
            "observation": {"content": [{"type": "text", "text": "out-a"}], "is_error": False},
        },
        {
            "id": "e0000000-5",
            "kind": "AgentErrorEvent",
            "source": "agent",
            "tool_call_id": "b",
            "tool_name": "terminal",
            "error": "boom",
        },
        {
            "id": "e0000000-6",
            "kind": "ConversationStateUpdateEvent",
            "source": "environment",
            "key": "stats",
            "value": {},
        },
        {"id": "e0000000-7", "kind": "NewFangledEvent", "source": "agent"},
    ]


def test_sdk_batches_errors_and_unknown_kinds(tmp_path):
    events = tmp_path / "conv" / "events"
    events.mkdir(parents=True)
    for i, event in enumerate(_sdk_events()):
        _event_file(events, i, event)
    (events / "event-00008-e0000000-8.json").write_text('{"id": "e0000000-8", "kin')
    (events / "notes.txt").write_text("hello")
    (trace,), rejects, report = ingest_one("openhands", tmp_path / "conv")
    assert trace.source_id == "conv"  # no base_state.json: the folder's name
    assert [m.role for m in trace.messages] == ["system", "user", "assistant", "tool", "tool"]
    assert trace.messages[0].content == "SYS\n\nCTX"
    assert trace.messages[1].content == "go\n<skill/>"
    assert [c.id for c in trace.messages[2].tool_calls] == ["a", "b"]
    assert trace.messages[4].is_error is True and trace.messages[4].content == "boom"
    assert trace.metadata["skipped_blocks"] == {"encrypted reasoning": 1}
    assert dict(report.skipped) == {"state update": 1}
    assert {(r.line, r.category) for r in rejects} == {
        (8, "unsupported"),
        (9, "malformed"),
        (10, "unsupported"),
    }
    assert any(r.file.endswith("event-00008-e0000000-8.json") for r in rejects)


def _msg(event_id: str, text: str, parent: str | None) -> dict:
    role = "user" if text.startswith("u") else "assistant"
    return {
        "id": event_id,
        "kind": "MessageEvent",
        "source": "user" if role == "user" else "agent",
        "parent_id": parent,
        "llm_message": {"role": role, "content": [{"type": "text", "text": text}]},
    }


def test_sdk_keeps_only_the_active_branch(tmp_path):
    folder = tmp_path / "conv"
    (folder / "events").mkdir(parents=True)
    branch = [
        _msg("aaaaaaaa-1", "u1", None),
        _msg("aaaaaaaa-2", "a1", "aaaaaaaa-1"),
        _msg("aaaaaaaa-3", "u2 abandoned", "aaaaaaaa-2"),
        _msg("aaaaaaaa-4", "u2 kept", "aaaaaaaa-2"),
        _msg("aaaaaaaa-5", "a2", "aaaaaaaa-4"),
    ]
    for i, event in enumerate(branch):
        _event_file(folder / "events", i, event)
    (folder / "base_state.json").write_text(
        json.dumps({"id": "c-1", "leaf_event_id": "aaaaaaaa-5"})
    )
    (trace,), rejects, _ = ingest_one("openhands", folder)
    assert [m.content for m in trace.messages] == ["u1", "a1", "u2 kept", "a2"]
    assert [(r.line, r.category) for r in rejects] == [(3, "dropped")]


def test_bad_inputs_are_input_errors(tmp_path):
    truncated = tmp_path / "t.json"
    truncated.write_text(GUI.read_text()[:500])
    with pytest.raises(InputError, match=r"t\.json:\d+:\d+: truncated"):
        ingest_one("openhands", truncated)
    other = tmp_path / "o.json"
    other.write_text('{"messages": []}')
    with pytest.raises(InputError, match="not an OpenHands trajectory"):
        ingest_one("openhands", other)
    with pytest.raises(InputError, match="not an OpenHands conversation folder"):
        ingest_one("openhands", tmp_path)
    event = next((PWD / "events").glob("event-00001-*.json"))
    with pytest.raises(InputError, match="give its folder"):
        ingest_one("openhands", event)
    with pytest.raises(InputError, match="unknown option"):
        ingest_files("openhands", [GUI], {"sidechains": "drop"})
    with pytest.raises(InputError, match="reasoning must be"):
        ingest_files("openhands", [GUI], {"reasoning": "maybe"})


def test_a_folder_copy_reads_the_same(tmp_path):
    copy = tmp_path / "x"
    shutil.copytree(PROBE, copy)
    (a,), _, _ = ingest_one("openhands", PROBE)
    (b,), _, _ = ingest_one("openhands", copy)
    assert a.messages == b.messages and a.source_lines == b.source_lines


# ---- secrets planted in any text field never reach the output -----------------------------------

ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


@st.composite
def planted(draw) -> tuple[str, str]:
    body = draw(st.text(alphabet=ALNUM, min_size=24, max_size=24))
    kind = draw(st.sampled_from(["proj", "akia", "ghp"]))
    text = {
        "proj": f"sk-proj-{body}",
        "akia": f"AKIA{body[:16].upper()}",
        "ghp": f"ghp_{body}{body[:12]}",
    }[kind]
    return f" {text} ", text if kind == "akia" else body


FIELDS = ("user", "system", "thought", "arguments", "result", "call_id")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(FIELDS), planted()), min_size=1, max_size=4))
def test_no_planted_secret_reaches_the_output(plants):
    at = {field: text for field, (text, _) in plants}
    materials = [m for _, (_, m) in plants]
    call_id = "call" + at.get("call_id", "_1")
    response = _response(
        "r",
        [(call_id, "execute_bash", {"command": at.get("arguments", "ls")})],
        at.get("thought", "ok"),
    )
    trajectory = [
        {
            "id": 0,
            "source": "agent",
            "action": "system",
            "args": {"content": at.get("system", "S")},
        },
        {"id": 1, "source": "user", "action": "message", "args": {"content": at.get("user", "hi")}},
        {
            "id": 2,
            "source": "agent",
            "action": "run",
            "args": {},
            "tool_call_metadata": _meta(call_id, "execute_bash", response),
        },
        {
            "id": 3,
            "source": "agent",
            "cause": 2,
            "observation": "run",
            "content": at.get("result", "x"),
            "tool_call_metadata": _meta(call_id, "execute_bash", response),
        },
    ]
    events = [
        {
            "id": "s0000000-0",
            "kind": "SystemPromptEvent",
            "source": "agent",
            "system_prompt": {"text": at.get("system", "S")},
            "tools": [],
        },
        {
            "id": "s0000000-1",
            "kind": "MessageEvent",
            "source": "user",
            "llm_message": {
                "role": "user",
                "content": [{"type": "text", "text": at.get("user", "hi")}],
            },
        },
        {
            "id": "s0000000-2",
            "kind": "ActionEvent",
            "source": "agent",
            "thought": [{"type": "text", "text": at.get("thought", "t")}],
            "tool_call": {
                "id": call_id,
                "name": "terminal",
                "arguments": json.dumps({"command": at.get("arguments", "ls")}),
            },
            "tool_call_id": call_id,
            "tool_name": "terminal",
            "llm_response_id": "R",
        },
        {
            "id": "s0000000-3",
            "kind": "ObservationEvent",
            "source": "environment",
            "tool_call_id": call_id,
            "tool_name": "terminal",
            "observation": {"content": [{"type": "text", "text": at.get("result", "x")}]},
        },
    ]
    app, runner = build_app(), CliRunner()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "conv" / "events").mkdir(parents=True)
        for i, event in enumerate(events):
            _event_file(root / "conv" / "events", i, event)
        (root / "t.json").write_text(json.dumps(trajectory))
        for source in (root / "t.json", root / "conv"):
            out = root / "out" / f"{source.stem}.jsonl"
            result = runner.invoke(app, ["ingest", "-f", "openhands", str(source), "-o", str(out)])
            assert result.exit_code == 0, result.output
            written = [p.read_bytes() for p in (root / "out").iterdir()]
            for material in materials:
                assert all(material.encode() not in data for data in written), material
                assert material not in result.output
