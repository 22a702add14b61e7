from pathlib import Path

import pytest

from tuneloop.data.ingest import ingest_files
from tuneloop.data.ingest.openai_chat import join_chunks
from tuneloop.errors import InputError

FIXTURE = Path(__file__).parents[1] / "fixtures" / "openai_proxy.jsonl"


@pytest.fixture(scope="module")
def result():
    return ingest_files("openai_chat", [FIXTURE])


def test_every_line_is_accounted_for(result):
    traces, rejects, report = result
    assert report.lines_read == 12 and report.blank == 1
    assert report.ingested + report.rejected == report.lines_read
    assert {r.line for r in rejects} == {6, 10, 11, 12, 13}
    assert {n for t in traces for n in t.source_lines} == {1, 2, 3, 5, 7, 8, 9}


def test_tool_calls_and_results_in_order(result):
    traces = {t.source_id: t for t in result[0]}
    t = traces["chatcmpl-A2"]
    assert [m.role for m in t.messages] == ["system", "user", "assistant", "tool", "assistant"]
    call = t.messages[2].tool_calls[0]
    assert (call.id, call.name, call.arguments) == (
        "call_abc123",
        "get_weather",
        '{"city": "Paris"}',
    )
    assert t.messages[3].tool_call_id == "call_abc123"
    assert t.feedback.verdict == "up" and t.started_at == "2026-04-30T08:00:02Z"
    assert t.metadata["tools"][0]["function"]["name"] == "get_weather"


def test_streamed_response_is_joined(result):
    t = {t.source_id: t for t in result[0]}["chatcmpl-S1"]
    assert t.messages[-1].tool_calls[0].arguments == '{"city": "Oslo"}'
    assert t.metadata["finish_reason"] == "tool_calls"


def test_wrapped_bodies_choices_and_legacy_shapes(result):
    traces = {t.source_id: t for t in result[0]}
    assert traces["chatcmpl-B1"].feedback.verdict == "down"
    assert traces["chatcmpl-B1"].model == "gpt-4o-2024-08-06"
    assert [traces[f"chatcmpl-N2#{i}"].messages[-1].content for i in (0, 1)] == ["Blue.", "Green."]
    conv = traces["conv-7"]
    assert conv.messages[0].role == "system" and "[image]" in conv.messages[1].content
    assert conv.feedback.score == pytest.approx(0.75)
    legacy = traces["openai_proxy:9"]
    assert legacy.messages[2].role == "tool"
    assert legacy.messages[2].tool_call_id == legacy.messages[1].tool_calls[0].id


def test_reject_reasons_name_the_problem(result):
    reasons = {r.line: (r.category, r.reason) for r in result[1]}
    assert reasons[6][0] == "dropped" and "429" in reasons[6][1]
    assert "tool_call_id" in reasons[10][1]
    assert reasons[12][0] == "malformed"
    assert reasons[12][1].startswith("expected a JSON object, got list (a JSON array")
    assert reasons[13][0] == "unsupported"


def test_first_choice_option_and_unknown_option():
    traces, _, _ = ingest_files("openai_chat", [FIXTURE], {"choices": "first"})
    assert "chatcmpl-N2" in {t.source_id for t in traces}
    with pytest.raises(InputError, match="unknown option"):
        ingest_files("openai_chat", [FIXTURE], {"choice": "first"})


def test_join_chunks_multiple_choices():
    chunks = [
        {"id": "x", "choices": [{"index": 1, "delta": {"content": "b"}}]},
        {"id": "x", "choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason": "stop"}]},
    ]
    out = join_chunks(chunks)
    assert [c["message"]["content"] for c in out["choices"]] == ["a", "b"]
