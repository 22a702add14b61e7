"""The `aider` ingester on real Aider files (tests/data/fixtures/aider/SOURCES.md: Aider's own
chat-history test fixture and an `.aider.llm.history` from a public MIT project) and on small
hand-made transcripts for the traps they do not show."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tuneloop.data.ingest.aider  # noqa: F401  (registers the ingester)
from tuneloop.data.ingest import ingest_files
from tuneloop.data.ingest.aider import (
    chat_blocks,
    is_aider,
    read_chat_history,
    read_llm_history,
)
from tuneloop.errors import InputError

from ..test_secrets_never_written import SEP, secret
from .kit import assert_ingest_hides, ingest_one

FIXTURES = Path(__file__).parents[1] / "fixtures"
CHAT = FIXTURES / "aider" / "chat-history.md"
LLM = FIXTURES / "aider" / "llm.history"


def _roles(traces) -> dict[str, int]:
    roles = [m.role for t in traces for m in t.messages]
    return {r: roles.count(r) for r in ("system", "user", "assistant") if r in roles}


# ---- the real files -------------------------------------------------------------------------


def test_chat_history_sessions_commands_and_outputs():
    traces, rejects, report = ingest_one("aider", CHAT)
    assert (report.lines_read, report.ingested, report.traces, rejects) == (90, 25, 6, [])
    assert report.skipped == {"aider output": 39, "command": 18, "empty session": 8}
    assert _roles(traces) == {"user": 9, "assistant": 12}
    assert [t.source_id for t in traces] == [
        "chat-history.md:1",  # the file starts mid-session, before any header
        "chat-history.md:103",
        "chat-history.md:218",
        "chat-history.md:1622",
        "chat-history.md:1680",
        "chat-history.md:1680#2",  # cut at /clear
    ]
    assert [len(t.messages) for t in traces] == [1, 2, 3, 1, 8, 6]
    assert all(
        not m.tool_calls for t in traces for m in t.messages
    )  # no tool calls in a transcript
    head = traces[0]
    assert head.messages[0].content.startswith(
        "# Fix any errors below, if possible.\n\n## Running:"
    )
    assert head.started_at is None and head.metadata["session_id"] == "chat-history.md:1"


def test_chat_history_reply_edit_blocks_model_and_usage():
    spinner = ingest_one("aider", CHAT)[0][1]
    assert [m.role for m in spinner.messages] == ["user", "assistant"]
    assert spinner.messages[0].content == "Use the Spinner instead of the inlined custom spinner"
    reply = spinner.messages[1].content
    assert reply.startswith("Certainly! I'll modify the `run_install` function")
    assert "<<<<<<< SEARCH" in reply and reply.endswith(
        "consistent spinner behavior across the application."
    )
    assert spinner.model == "claude-3-5-sonnet-20240620"
    assert spinner.started_at == "2024-08-05T19:33:32"
    assert spinner.metadata == {
        "session_id": "2024-08-05 19:33:32",
        "usage": {"tokens_sent": 5244, "tokens_received": 604, "cost_usd": 0.02},
        "edit_blocks": 1,
    }
    assert spinner.source_lines == [7, 9, 10]  # header, input, reply; the outputs are skipped


def test_chat_history_model_switch_clear_and_multiline_output():
    traces = ingest_one("aider", CHAT)[0]
    mini = traces[2]
    assert mini.model == "gpt-4o-mini" and [
        m.content for m in mini.messages if m.role == "user"
    ] == ["hi", "hi"]
    before, after = traces[4], traces[5]
    assert before.model == "claude-3-5-sonnet-20240620"
    assert before.metadata["model_switches"] == [
        {"at_message": 5, "model": "openrouter/anthropic/claude-3.5-sonnet"}
    ]
    assert after.model == "openrouter/anthropic/claude-3.5-sonnet"
    assert after.messages[0].content == "make `test_subtree_only` use GitTemporaryDirectory"
    # replies to lint / test output aider sent without an input line in the transcript
    assert (before.metadata["unlogged_inputs"], after.metadata["unlogged_inputs"]) == (2, 4)
    # a pytest run printed as one multi-line aider message is output, not a reply
    texts = [m.content for t in traces for m in t.messages]
    assert not any("short test summary info" in (t or "") and t.startswith("tests/") for t in texts)
    assert not any((t or "").lstrip().startswith("with open(root_file") for t in texts)


def test_llm_history_one_trace_per_request():
    traces, rejects, report = ingest_one("aider", LLM)
    assert (report.lines_read, report.ingested, report.traces, rejects) == (8, 8, 4, [])
    assert _roles(traces) == {"system": 4, "user": 18, "assistant": 18}
    assert [len(t.messages) for t in traces] == [7, 9, 11, 13]
    assert [t.source_lines for t in traces] == [[1, 2], [3, 4], [5, 6], [7, 8]]
    first = traces[0]
    assert first.messages[0].role == "system"
    assert first.messages[0].content.startswith("Act as an expert code analyst.\nAnswer questions")
    assert first.messages[-1].content.startswith(
        "I notice that while the project structure is set up"
    )
    assert (first.started_at, first.ended_at) == ("2025-01-31T11:21:36", "2025-01-31T11:21:41")
    assert first.source_id == "llm.history:1" and first.model is None
    # the next request carries this reply in its prompt, exactly
    assert traces[1].messages[6].content == first.messages[6].content
    assert traces[1].messages[7].role == "user"
    assert traces[1].messages[7].content.startswith("let's think through the ideal interface.")
    assert all(t.messages[-1].role == "assistant" for t in traces)


def test_detection_says_yes_to_aider_files_and_no_to_every_other_fixture():
    assert is_aider(CHAT) and is_aider(LLM)
    others = [p for p in FIXTURES.rglob("*") if "aider" not in p.parts]
    assert others and not [p for p in others if is_aider(p)]


def test_reasoning_drop_unknown_options_and_folders(tmp_path):
    with pytest.raises(InputError, match="unknown option"):
        ingest_files("aider", [CHAT], {"thoughts": "drop"})
    with pytest.raises(InputError, match="is a folder"):
        ingest_files("aider", [tmp_path])
    bad = tmp_path / ".aider.chat.history.md"
    bad.write_bytes(b"\n# aider chat started at 2024-01-01 10:00:00\n\n#### hi \xff\n")
    with pytest.raises(InputError, match=r"chat.history.md:4: not UTF-8"):
        ingest_files("aider", [bad])


# ---- hand-made transcripts ------------------------------------------------------------------

TAG = "thinking-content-7bbeb8e1441453ad999a0bbba8a46d4b"


def _chat(*lines: str) -> list[str]:
    return "\n".join(lines).split("\n")


def test_commands_that_reach_the_model_and_those_that_do_not():
    lines = _chat(
        "# aider chat started at 2025-03-01 09:00:00",
        "",
        "> Model: deepseek/deepseek-reasoner with diff edit format, prompt cache  ",
        "",
        "#### /ask why is it slow?  ",
        "",
        f"<{TAG}>",
        "It loops twice.",
        f"</{TAG}>",
        "",
        "It loops over the list twice.",
        "",
        "> Tokens: 2.3k sent, 1.1k cache write, 86 received. "
        "Cost: $0.0095 message, $0.01 session.  ",
        "",
        "#### /ok  ",
        "",
        "#### <blank>  ",
        "",
        "#### /drop a.py  ",
        "",
        "#### !ls  ",
        "",
        "#### /ex  ",
        "",
    )
    parsed = read_chat_history("h.md", lines)
    [trace] = parsed.traces
    assert [(m.role, m.content) for m in trace.messages] == [
        ("user", "why is it slow?"),
        ("assistant", "It loops over the list twice."),
        ("user", "Ok, please go ahead and make those changes."),
    ]
    assert trace.messages[1].reasoning == "It loops twice."
    assert trace.model == "deepseek/deepseek-reasoner"
    assert trace.metadata["usage"] == {
        "tokens_sent": 2300,
        "tokens_received": 86,
        "cost_usd": 0.0095,
    }
    assert parsed.skipped == {"aider output": 2, "empty input": 1, "command": 3}
    dropped = read_chat_history("h.md", lines, keep_reasoning=False).traces[0]
    assert all(m.reasoning is None for m in dropped.messages)


def test_multiline_input_and_markdown_hard_breaks():
    lines = _chat(
        "# aider chat started at 2025-03-01 09:00:00",
        "",
        "#### first line  ",
        "####   ",
        "#### ends with two spaces    ",
        "",
        "Answer, with a blank line",
        "",
        "inside it.",
        "",
    )
    [trace] = read_chat_history("h.md", lines).traces
    assert trace.messages[0].content == "first line\n\nends with two spaces  "
    assert trace.messages[1].content == "Answer, with a blank line\n\ninside it."
    assert [b.kind for b in chat_blocks(lines)] == ["header", "user", "text"]


def test_llm_history_bad_sections(tmp_path):
    lines = _chat(
        "stray text",
        "TO LLM 2025-01-01T10:00:00",
        "-------",
        "SYSTEM be brief",
        "-------",
        "USER type: text",
        "USER text: look at this",
        "USER type: image_url",
        "USER Image_url URL: data:image/png;base64,AAAA",
        "continued without a prefix",
        "LLM RESPONSE 2025-01-01T10:00:02",
        f"ASSISTANT <{TAG}>hmm</{TAG}>A cat.",
        "TO LLM 2025-01-01T10:01:00",
        "-------",
        "USER and now?",
        "LLM RESPONSE 2025-01-01T10:01:09",
        "LLM RESPONSE 2025-01-01T10:02:00",
        "ASSISTANT orphan",
        "TO LLM 2025-01-01T10:03:00",
        "-------",
        "USER never answered",
        "",
    )
    parsed = read_llm_history("x.history", lines)
    assert [(r.line, r.category) for r in parsed.rejects] == [
        (1, "malformed"),
        (4, "dropped"),
        (5, "dropped"),
        (6, "malformed"),
        (7, "dropped"),
    ]
    assert "line 1: text before the first TO LLM" in parsed.rejects[0].reason
    [trace] = parsed.traces
    assert [(m.role, m.content) for m in trace.messages] == [
        ("system", "be brief"),
        ("user", "look at this\n[image]\ncontinued without a prefix"),
        ("assistant", "A cat."),
    ]
    assert trace.messages[-1].reasoning == "hmm" and parsed.records == 7


# ---- property: every record ends in exactly one place; no secret reaches the output ---------

LINE = st.sampled_from(
    [
        "",
        "# aider chat started at 2025-01-01 10:00:00",
        "#### hi  ",
        "#### /clear  ",
        "#### /ask q  ",
        "#### <blank>  ",
        "> Model: m with diff edit format  ",
        "> multi-line output starts",
        "reply text",
        "  ",
        "TO LLM 2025-01-01T10:00:00",
        "LLM RESPONSE 2025-01-01T10:00:01",
        "USER u",
        "ASSISTANT a",
        "-------",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(LINE, max_size=20))
def test_every_record_ends_in_exactly_one_place(lines):
    for read in (read_chat_history, read_llm_history):
        parsed = read("x", lines)
        merged = {n for t in parsed.traces for n in t.source_lines}
        rejected = {r.line for r in parsed.rejects}
        assert not merged & rejected
        assert len(merged) + len(rejected) + sum(parsed.skipped.values()) == parsed.records


PLACES = ["input", "reply", "output", "system", "prompt", "response"]


@st.composite
def planted(draw) -> tuple[str, str, list[str]]:
    at, materials = {}, []
    for place in draw(st.lists(st.sampled_from(PLACES), min_size=1, max_size=4, unique=True)):
        text, material = draw(secret(file_safe=True))
        at[place] = draw(SEP).replace("\n", " ") + text + draw(SEP).replace("\n", " ")
        materials.append(material or text)
    get = at.get
    chat = (
        "\n# aider chat started at 2025-01-01 10:00:00\n\n"
        f"> Aider v0.80.0 {get('output', '')}  \n\n"
        f"#### fix it {get('input', '')}  \n\n"
        f"Done {get('reply', '')}\n\n"
    )
    llm = (
        f"TO LLM 2025-01-01T10:00:00\n-------\nSYSTEM act {get('system', '')}\n-------\n"
        f"USER do {get('prompt', '')}\nLLM RESPONSE 2025-01-01T10:00:05\n"
        f"ASSISTANT ok {get('response', '')}\n"
    )
    return chat, llm, materials


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(planted())
def test_no_planted_secret_reaches_the_ingest_output(case):
    chat, llm, materials = case
    with tempfile.TemporaryDirectory() as tmp:
        sources = [Path(tmp) / ".aider.chat.history.md", Path(tmp) / ".aider.llm.history"]
        sources[0].write_text(chat)
        sources[1].write_text(llm)
        out = Path(tmp) / "out" / "traces.jsonl"
        assert_ingest_hides("aider", sources, out, materials)
