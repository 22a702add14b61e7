"""The `cline` ingester on three task folders written field for field from Cline's and Roo
Code's serializers (tests/data/fixtures/cline/SOURCES.md says why none is a copied export) and
on small hand-made folders for the traps they do not show."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import tuneloop.data.ingest.cline  # noqa: F401  (registers the ingester)
from tuneloop.cli import build_app
from tuneloop.data.ingest import ingest_files
from tuneloop.data.ingest.cline import is_cline_task, read_task, xml_calls
from tuneloop.errors import InputError

from ..test_secrets_never_written import SEP, secret
from .kit import assert_ingest_hides, assert_paired, ingest_one

FIXTURES = Path(__file__).parents[1] / "fixtures"
HERE = FIXTURES / "cline"
XML = HERE / "1733417512894"
NATIVE = HERE / "1770858773985"
ROO = HERE / "0b9d4c2e-7f3a-4e55-9a61-2d8c3f7e1a44"


def _calls(trace) -> list:
    return [c for m in trace.messages for c in m.tool_calls or []]


def _roles(trace) -> dict[str, int]:
    return {r: sum(m.role == r for m in trace.messages) for r in ("user", "assistant", "tool")}


# ---- the fixture folders --------------------------------------------------------------------


def test_cline_2_xml_calls_and_header_block_results():
    [trace], rejects, report = ingest_one("cline", XML)
    assert (report.lines_read, report.ingested, rejects) == (38, 14, [])  # 14 messages, 24 rows
    assert report.skipped == {"ui-only": 22, "ui-partial": 2}
    assert _roles(trace) == {"user": 7, "assistant": 7, "tool": 7} and len(_calls(trace)) == 8
    assert_paired(trace)
    first = trace.messages[1]
    assert [(c.id, c.name, json.loads(c.arguments)) for c in first.tool_calls] == [
        ("cline_2_0", "read_file", {"path": "app.py"})
    ]
    assert (
        first.content.startswith("<thinking>\nThe user wants")
        and "<read_file>" not in first.content
    )
    # the header block and the result block after it are one tool message, kept verbatim
    assert trace.messages[2].content.startswith("[read_file for 'app.py'] Result:\nimport logging")
    assert trace.messages[3].content.startswith("<environment_details>")
    two = trace.messages[7]  # write_to_file, then an execute_command Cline refused to run
    assert [c.name for c in two.tool_calls] == ["write_to_file", "execute_command"]
    assert json.loads(two.tool_calls[0].arguments)["content"].startswith("import logging\n")
    assert two.content.endswith(
        "[Response interrupted by a tool use result. Only one tool may "
        "be used at a time and should be placed at the end of the message.]"
    )
    assert trace.messages[9].tool_call_id == "cline_6_1"
    assert trace.messages[9].content.startswith("Tool [execute_command] was not executed")
    assert "[image]" in trace.messages[0].content and "iVBOR" not in trace.messages[0].content
    # the last attempt_completion ends the task: a call with no result
    assert [c.id for c in trace.messages[-1].tool_calls] == ["cline_14_0"]
    assert trace.model is None and trace.source_id == "1733417512894"
    assert (trace.started_at, trace.ended_at) == (
        "2024-12-05T16:51:52.898000Z",
        "2024-12-05T16:53:15.455000Z",
    )
    assert trace.metadata["usage"] == {
        "tokens_in": 28,
        "tokens_out": 904,
        "cache_writes": 4505,
        "cache_reads": 21706,
        "cost_usd": 0.03649,
    }
    assert trace.source_lines == list(range(1, 15))


def test_cline_3_native_calls_answered_in_plain_text():
    [trace], rejects, report = ingest_one("cline", NATIVE)
    assert (report.lines_read, report.ingested, rejects) == (31, 11, [])  # 10 + 20 rows + meta
    assert report.skipped == {"ui-only": 17, "ui-partial": 3}
    assert _roles(trace) == {"user": 5, "assistant": 5, "tool": 5} and len(_calls(trace)) == 6
    assert_paired(trace)
    first = trace.messages[1]
    assert [c.id for c in first.tool_calls] == [
        "toolu_01R7mXcVq2Lk8Jd3PbZt5Wn4",
        "toolu_01HfG6uT9sQe2Yc4VnKx8Ma1",
    ]
    assert first.reasoning == "I should look at cart.py and its tests before proposing anything."
    # results by order and name: the text result, then the "not executed" notice
    assert trace.messages[2].tool_call_id == "toolu_01R7mXcVq2Lk8Jd3PbZt5Wn4"
    assert trace.messages[2].content.startswith("[read_file for 'shop/cart.py'] Result:\n")
    assert trace.messages[3].tool_call_id == "toolu_01HfG6uT9sQe2Yc4VnKx8Ma1"
    assert trace.messages[3].content.startswith("Tool [read_file] was not executed")
    assert trace.model == "claude-opus-4-5-20251101"
    assert trace.metadata["model_switches"] == [
        {"at_message": 8, "model": "claude-sonnet-4-5-20250929"}
    ]
    assert trace.metadata["skipped_blocks"] == {"redacted_thinking": 1}
    assert (
        trace.metadata["cline_version"] == "3.57.1"
        and trace.metadata["usage"]["cost_usd"] == 0.0822
    )
    assert "EqMBCkgIBhAB" not in json.dumps(trace.to_json())  # a signature is never text
    assert 31 in trace.source_lines  # task_metadata.json, merged


def test_roo_code_native_tools_condense_and_encrypted_reasoning():
    [trace], rejects, report = ingest_one("cline", ROO)
    assert (report.lines_read, report.ingested, rejects) == (35, 13, [])
    assert report.skipped == {"ui-only": 21, "ui-partial": 1}
    assert _roles(trace) == {"user": 6, "assistant": 6, "tool": 6} and len(_calls(trace)) == 7
    assert_paired(trace)
    assert trace.messages[1].reasoning.startswith("Read the function first")
    assert trace.metadata["skipped_blocks"] == {"encrypted reasoning": 1}
    assert "gAAAAAB" not in json.dumps(trace.to_json())
    [summary] = trace.metadata["compactions"]
    assert summary["at_message"] == 7 and summary["summary"].startswith("## Conversation Summary")
    failed = trace.messages[8]
    assert failed.role == "tool" and failed.is_error is True
    assert failed.tool_call_id == "call_Zt5k9MwQ2rYc8HnV3bLx6Pj1"
    both = trace.messages[13]
    assert [c.name for c in both.tool_calls] == ["apply_diff", "execute_command"]
    assert [m.tool_call_id for m in trace.messages[14:16]] == [c.id for c in both.tool_calls]
    assert trace.started_at == "2026-04-03T10:39:59.988000Z"


def test_reasoning_drop_and_unknown_options():
    for folder in (NATIVE, ROO):
        [kept], _, _ = ingest_one("cline", folder)
        [dropped], _, report = ingest_one("cline", folder, reasoning="drop")
        assert all(m.reasoning is None for m in dropped.messages)
        assert len(dropped.messages) == len(kept.messages)
    with pytest.raises(InputError, match="unknown option"):
        ingest_files("cline", [NATIVE], {"thinking": "drop"})
    with pytest.raises(InputError, match="keep' or 'drop"):
        ingest_files("cline", [NATIVE], {"reasoning": "hide"})


def test_the_api_file_itself_reads_the_whole_folder():
    by_folder = ingest_one("cline", NATIVE)
    by_file = ingest_one("cline", NATIVE / "api_conversation_history.json")
    assert [t.to_json() for t in by_file[0]] == [t.to_json() for t in by_folder[0]]
    assert by_file[2].to_json() == by_folder[2].to_json()


def test_detection_says_yes_to_task_folders_and_no_to_every_other_fixture():
    for folder in (XML, NATIVE, ROO):
        assert is_cline_task(folder) and is_cline_task(folder / "api_conversation_history.json")
        assert not is_cline_task(folder / "ui_messages.json")
    assert not is_cline_task(HERE)  # the folder of tasks is walked, not one task
    others = [p for p in FIXTURES.rglob("*") if "cline" not in p.parts]
    assert others and not [p for p in others if is_cline_task(p)]


@pytest.mark.parametrize("fmt", ["auto", "cline"])
def test_the_tasks_folder_stands_for_each_task_folder(tmp_path, fmt):
    out = tmp_path / "t.jsonl"
    ran = CliRunner().invoke(build_app(), ["ingest", "-f", fmt, str(HERE), "-o", str(out)])
    assert ran.exit_code == 0, ran.output
    assert "3 records written" in ran.output and "skipped       6  ui-partial" in ran.output
    assert fmt == "cline" or "auto: cline for 3 source(s)" in ran.output
    ids = sorted(json.loads(line)["source_id"] for line in out.read_text().splitlines())
    assert ids == sorted(p.name for p in (XML, NATIVE, ROO))


# ---- hand-made folders ----------------------------------------------------------------------


def _task(tmp: Path, messages, ui=None, name="1780000000000", api="api_conversation_history.json"):
    folder = tmp / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / api).write_text(json.dumps(messages))
    if ui is not None:
        (folder / "ui_messages.json").write_text(ui if isinstance(ui, str) else json.dumps(ui))
    return folder


def _text(t: str) -> dict:
    return {"type": "text", "text": t}


def test_bad_messages_are_rejected_with_their_position(tmp_path):
    folder = _task(
        tmp_path,
        [
            {"role": "user", "content": "<task>\nhi\n</task>"},
            "not a message",
            {"role": "system", "content": "x"},
            {"role": "assistant", "content": []},
            {"role": "assistant", "content": [_text("hello")]},
        ],
        ui='[{"ts": 1, "type": "say", "say": "text"}, 7',
    )
    [trace], rejects, report = ingest_one("cline", folder)
    assert [(r.line, r.category) for r in rejects] == [
        (2, "malformed"),
        (3, "malformed"),
        (6, "malformed"),
    ]
    assert "message 1: not an object" in rejects[0].reason
    assert rejects[2].file.endswith("ui_messages.json") and "truncated" in rejects[2].reason
    assert report.skipped == {"empty message": 1}
    assert [m.content for m in trace.messages] == ["<task>\nhi\n</task>", "hello"]


def test_unreadable_sources_name_themselves(tmp_path):
    with pytest.raises(InputError, match="not a Cline task folder"):
        read_task(tmp_path)
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "api_conversation_history.json").write_text('[{"role": "user", "content": "a')
    with pytest.raises(InputError, match=r"api_conversation_history.json:1:\d+: truncated"):
        read_task(folder)
    (folder / "api_conversation_history.json").write_text('{"role": "user"}')
    with pytest.raises(InputError, match="expected a JSON array of messages, got dict"):
        read_task(folder)


def test_a_task_without_turns_rejects_what_it_read(tmp_path):
    folder = _task(tmp_path, [{"role": "assistant", "content": ""}], ui=[{"ts": 1, "type": "say"}])
    (folder / "task_metadata.json").write_text('{"model_usage": []}')
    traces, rejects, report = ingest_one("cline", folder)
    assert traces == [] and [(r.line, r.category) for r in rejects] == [(3, "dropped")]
    assert report.skipped == {"empty message": 1, "ui-only": 1}


def test_results_that_name_no_open_call_stay_user_text(tmp_path):
    folder = _task(
        tmp_path,
        [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "a"}}
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "elsewhere", "content": "stray"},
                    _text("[list_files for '.'] Result:\na.py"),
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [_text("A"), {"type": "image"}],
                    },
                ],
            },
        ],
    )
    [trace], _, _ = ingest_one("cline", folder)
    assert [(m.role, m.content) for m in trace.messages[2:]] == [
        ("user", "stray\n[list_files for '.'] Result:\na.py"),
        ("tool", "A\n[image]"),
    ]
    assert trace.metadata["unpaired_tool_results"] == 2


def test_a_result_may_name_the_tool_without_its_verb(tmp_path):
    use = {"type": "tool_use", "id": "s1", "name": "use_subagents", "input": {"prompt_1": "x"}}
    folder = _task(
        tmp_path,
        [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [use]},
            {
                "role": "user",
                "content": [_text("[subagents] Result:\nSubagent results:\nTotal: 1")],
            },
        ],
    )
    [trace], _, _ = ingest_one("cline", folder)
    assert trace.messages[-1].role == "tool" and trace.messages[-1].tool_call_id == "s1"


def test_legacy_file_name_header_block_images_and_notices(tmp_path):
    xml = "<read_file>\n<path>a.png</path>\n</read_file>\n<read_file>\n<path>b</path>\n</read_file>"
    folder = _task(
        tmp_path,
        [
            {"role": "user", "content": [_text("<task>\nlook\n</task>")]},
            {"role": "assistant", "content": [_text(xml)]},
            {
                "role": "user",
                "content": [
                    _text("[read_file for 'a.png'] Result:"),
                    _text("the picture"),
                    {"type": "image", "source": {"type": "base64", "data": "AAAA"}},
                    _text(
                        "Skipping tool [read_file for 'b'] due to user rejecting a previous tool."
                    ),
                    _text("<environment_details>\nx\n</environment_details>"),
                ],
            },
        ],
        api="claude_messages.json",
    )
    assert is_cline_task(folder)
    [trace], _, _ = ingest_one("cline", folder)
    assert [m.role for m in trace.messages] == ["user", "assistant", "tool", "tool", "user"]
    assert trace.messages[1].content is None
    assert trace.messages[2].content == "[read_file for 'a.png'] Result:\nthe picture\n[image]"
    assert trace.messages[3].tool_call_id == "cline_2_1"


def test_roo_reasoning_items_go_to_the_next_reply(tmp_path):
    folder = _task(
        tmp_path,
        [
            {"role": "user", "content": "q", "ts": 1780000000500},
            {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": "think"}],
                "ts": 1780000000600,
            },
            {"type": "reasoning", "summary": [], "encrypted_content": "gAAAA"},
            {
                "role": "assistant",
                "content": "a",
                "reasoning_details": [{"type": "reasoning.encrypted", "data": "x"}],
            },
            {"isTruncationMarker": True, "role": "user", "content": "[truncated]"},
        ],
    )
    [trace], _, report = ingest_one("cline", folder)
    assert [(m.role, m.content, m.reasoning) for m in trace.messages] == [
        ("user", "q", None),
        ("assistant", "a", "think"),
    ]
    assert report.skipped == {"encrypted reasoning": 1, "truncation marker": 1}
    assert trace.source_lines == [1, 2, 4] and trace.ended_at == "2026-05-28T20:26:40.600000Z"


def test_xml_calls_parse_top_level_tool_elements_only():
    text = (
        "<thinking>x</thinking>\n<execute_command>\n<command> ls -la </command>\n</execute_command>"
    )
    rest, [call] = xml_calls(text, {"execute_command"}, 5)
    assert rest == "<thinking>x</thinking>" and call.id == "cline_5_0"
    assert json.loads(call.arguments) == {"command": "ls -la"}
    assert xml_calls("<path>x</path>", {"read_file"}, 1) == ("<path>x</path>", [])


# ---- property: every record ends in exactly one place; no secret reaches the output ---------

BLOCK = st.one_of(
    st.builds(
        _text,
        st.sampled_from(
            ["", "hi", "[read_file for 'a'] Result:", "Tool [read_file] was not executed because x"]
        ),
    ),
    st.just({"type": "tool_use", "id": "t1", "name": "read_file", "input": {}}),
    st.just({"type": "tool_result", "tool_use_id": "t1", "content": "r"}),
    st.just({"type": "thinking", "thinking": "t", "signature": "s"}),
    st.just({"type": "redacted_thinking", "data": "d"}),
    st.sampled_from([{"type": "image"}, {"type": "odd"}, 3, None]),
)
MESSAGE = st.one_of(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "system"])},
        optional={
            "content": st.one_of(st.text(max_size=3), st.lists(BLOCK, max_size=3), st.none())
        },
    ),
    st.sampled_from([{"type": "reasoning", "summary": []}, {"isTruncationMarker": True}, "x", 1]),
    st.builds(lambda c: {"role": "user", "content": c, "isSummary": True}, st.text(max_size=2)),
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(MESSAGE, max_size=8), st.lists(st.sampled_from([{"partial": True}, {}, 2]), max_size=3)
)
def test_every_record_ends_in_exactly_one_place(messages, rows):
    with tempfile.TemporaryDirectory() as tmp:
        parsed = read_task(_task(Path(tmp), messages, ui=rows))
    merged = {n for t in parsed.traces for n in t.source_lines}
    rejected = {r.line for r in parsed.rejects}
    assert not merged & rejected
    assert len(merged) + len(rejected) + sum(parsed.skipped.values()) == parsed.records


PLACES = ["task", "reply", "thinking", "input", "result", "ui", "metadata"]


@st.composite
def planted_task(draw) -> tuple[list, list, dict, list[str]]:
    planted, materials = {}, []
    for place in draw(st.lists(st.sampled_from(PLACES), min_size=1, max_size=4, unique=True)):
        text, material = draw(secret())
        planted[place] = draw(SEP) + text + draw(SEP)
        materials.append(material or text.rsplit(" ", 1)[-1].split("=")[-1].strip())
    at = planted.get
    messages = [
        {"role": "user", "content": [_text("<task>\n" + at("task", "t") + "\n</task>")]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": at("thinking", "th"), "signature": "sig"},
                _text("ok " + at("reply", "")),
                {
                    "type": "tool_use",
                    "id": "t1",
                    "name": "execute_command",
                    "input": {"command": at("input", "ls")},
                },
            ],
        },
        {
            "role": "user",
            "content": [_text("[execute_command for 'ls'] Result:\n" + at("result", "r"))],
        },
    ]
    ui = [
        {
            "ts": 1,
            "type": "say",
            "say": "api_req_started",
            "text": json.dumps({"request": at("ui", "q"), "tokensIn": 1}),
        }
    ]
    meta = {"environment_history": [{"cline_version": at("metadata", "3.0")}]}
    return messages, ui, meta, materials


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(planted_task())
def test_no_planted_secret_reaches_the_ingest_output(case):
    messages, ui, meta, materials = case
    with tempfile.TemporaryDirectory() as tmp:
        folder = _task(Path(tmp), messages, ui=ui)
        (folder / "task_metadata.json").write_text(json.dumps(meta))
        out = Path(tmp) / "out" / "traces.jsonl"
        assert_ingest_hides("cline", [folder], out, materials)
