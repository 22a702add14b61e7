"""The `litellm` ingester on real logged calls (tests/data/fixtures/litellm/SOURCES.md): a
LiteLLM StandardLoggingPayload and an agent's gateway completion logs; failures, wrappers and
JSONL built from the real payload."""

from __future__ import annotations

import copy
import json
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import tuneloop.data.ingest.litellm  # noqa: F401  (registers the ingester)
from tuneloop.cli import build_app
from tuneloop.data.ingest import detect_format, ingest_files
from tuneloop.data.ingest.litellm import looks_like_litellm
from tuneloop.errors import InputError

from .kit import ingest_one

FIXTURES = Path(__file__).parents[1] / "fixtures"
LL = FIXTURES / "litellm"
PAYLOAD = LL / "standard_logging_payload.json"
CALLS = sorted((LL / "openhands_llm_logs").glob("*.json"))


def payload() -> dict:
    return json.loads(PAYLOAD.read_text())


# ---- real fixtures -----------------------------------------------------------------------------


def test_standard_logging_payload():
    (trace,), rejects, report = ingest_one("litellm", PAYLOAD)
    assert (report.lines_read, report.ingested, rejects) == (1, 1, [])
    assert [(m.role, m.content) for m in trace.messages] == [
        ("user", "Hello, world!"),
        ("assistant", "hi"),
    ]
    assert trace.source_id == "chatcmpl-2299b6a2-82a3-465a-b47c-04e685a2227f"
    assert trace.model == "gpt-4o"
    assert trace.started_at == "2025-01-24 09:20:46.847371"
    assert trace.metadata["cost_usd"] == pytest.approx(0.000225)
    assert trace.metadata["prompt_tokens"] == 10 and trace.metadata["completion_tokens"] == 20
    assert trace.metadata["finish_reason"] == "stop"


# messages and tool calls per call of the agent's six logged calls (each call repeats the
# conversation so far as its prompt, then adds the response)
CALL_COUNTS = [(3, 1), (5, 2), (7, 3), (9, 4), (11, 5), (13, 6)]


@pytest.mark.parametrize(("path", "counts"), list(zip(CALLS, CALL_COUNTS, strict=True)))
def test_gateway_completion_logs(path, counts):
    (trace,), rejects, report = ingest_one("litellm", path)
    assert report.lines_read == 1 and not rejects
    n_messages, n_calls = counts
    assert len(trace.messages) == n_messages
    assert sum(len(m.tool_calls or []) for m in trace.messages) == n_calls
    roles = Counter(m.role for m in trace.messages)
    assert roles == Counter(system=1, user=1, assistant=n_calls, tool=n_calls - 1)
    assert trace.model == "litellm_proxy/claude-sonnet-4-20250514"
    assert [t["function"]["name"] for t in trace.metadata["tools"]] == [
        "terminal",
        "str_replace_editor",
        "finish",
    ]
    assert trace.metadata["parameters"] == {
        "top_p": 1.0,
        "temperature": 0.0,
        "max_completion_tokens": 64000,
    }
    # every tool result answers the call just before it, by id
    for i, m in enumerate(trace.messages):
        if m.role == "tool":
            assert m.tool_call_id in {c.id for c in trace.messages[i - 1].tool_calls or []}


def test_gateway_log_by_hand():
    (trace,), _, _ = ingest_one("litellm", CALLS[-1])
    assert trace.metadata["cost_usd"] == pytest.approx(0.023172)
    assert trace.started_at == "2025-09-04T19:44:01.101060Z"  # timestamp - latency_sec
    assert trace.ended_at == "2025-09-04T19:44:06.707548Z"
    create = trace.messages[2].tool_calls[0]
    assert (create.id, create.name) == ("toolu_01AaHKJphyeTw3GFp4Xgiekv", "str_replace_editor")
    assert json.loads(create.arguments)["path"] == "/workspace/hello.py"
    failed = trace.messages[3]
    assert failed.tool_call_id == create.id and failed.name == "str_replace_editor"
    assert failed.content.startswith("Ran into [Errno 2] No such file or directory")
    last = trace.messages[-1]
    assert last.content.startswith("Great! The `hello.py` file already exists")
    assert [c.name for c in last.tool_calls] == ["finish"]
    assert trace.metadata["finish_reason"] == "tool_calls"


def test_detects_its_files_only():
    for path in [PAYLOAD, *CALLS]:
        assert looks_like_litellm(path), path
        assert detect_format(path) == "litellm", path
    others = [
        p
        for p in FIXTURES.rglob("*")
        if p.is_file() and LL not in p.parents and not p.name.startswith(".")
    ]
    assert others
    for path in others:
        assert not looks_like_litellm(path), path
    assert not looks_like_litellm(LL)


# ---- shapes and policies, on records built from the real payload ---------------------------------


def _variants() -> list[object]:
    ok = payload()
    failed = copy.deepcopy(ok)
    failed.update(status="failure", response=None, error_str="RateLimitError: slow down")
    failed["error_information"]["error_class"] = "RateLimitError"
    embedding = copy.deepcopy(ok)
    embedding["call_type"] = "aembedding"
    redacted = copy.deepcopy(ok)
    redacted["messages"][0]["content"] = "redacted-by-litellm"
    redacted["response"]["choices"][0]["message"]["content"] = "redacted-by-litellm"
    wrapped = {"standard_logging_object": copy.deepcopy(ok), "litellm_call_id": "x"}
    dumped = {"kwargs": {"standard_logging_object": copy.deepcopy(ok)}, "start_time": "t"}
    for i, record in enumerate(
        (wrapped["standard_logging_object"], dumped["kwargs"]["standard_logging_object"])
    ):
        record["id"] = record["response"]["id"] = f"call-{i}"
    return [ok, failed, embedding, redacted, wrapped, dumped, {"hello": "world"}]


def test_jsonl_records_failures_and_wrappers(tmp_path):
    path = tmp_path / "calls.jsonl"
    lines = [json.dumps(r) for r in _variants()]
    path.write_text("\n".join([*lines[:3], "", *lines[3:], '{"id": "broken'] + [""]))
    assert looks_like_litellm(path)
    traces, rejects, report = ingest_one("litellm", path)
    assert report.lines_read == 8
    assert [t.source_lines for t in traces] == [[1], [6], [7]]
    assert [t.source_id for t in traces] == [
        "chatcmpl-2299b6a2-82a3-465a-b47c-04e685a2227f",
        "call-0",
        "call-1",
    ]
    got = {(r.line, r.category, r.reason.split(" — ")[0].split(":")[0]) for r in rejects}
    assert got == {
        (2, "dropped", "failed call"),  # the error text after the dash
        (3, "unsupported", "call_type 'aembedding' is not a chat completion"),
        (5, "dropped", "messages redacted by LiteLLM (turn_off_message_logging)"),
        (8, "malformed", "not a logged LLM call (no messages and response)"),
        (9, "malformed", "invalid JSON"),
    }
    failure = next(r for r in rejects if r.line == 2)
    assert failure.reason == "failed call — RateLimitError: RateLimitError: slow down"


def test_json_array_choices_and_reasoning(tmp_path):
    record = payload()
    message = record["response"]["choices"][0]["message"]
    message["reasoning_content"] = "user greets; greet back"
    message["thinking_blocks"] = [{"type": "redacted_thinking", "data": "opaque"}]
    second = {
        "index": 1,
        "finish_reason": "stop",
        "message": {"role": "assistant", "content": "hey"},
    }
    record["response"]["choices"].append(second)
    record["model_parameters"] = {"temperature": 0.2, "tools": [{"type": "function"}]}
    path = tmp_path / "calls.json"
    path.write_text(json.dumps([record, payload()], indent=2))
    traces, rejects, report = ingest_one("litellm", path)
    assert (report.lines_read, len(traces), rejects) == (2, 3, [])
    first, other, plain = traces
    assert first.source_id.endswith("#0") and other.source_id.endswith("#1")
    assert first.messages[-1].reasoning == "user greets; greet back"
    assert first.metadata["skipped_blocks"] == {"encrypted reasoning": 1}
    assert "opaque" not in first.model_dump_json()
    assert other.messages[-1].content == "hey"
    assert first.metadata["tools"] == [{"type": "function"}]
    assert first.metadata["parameters"] == {"temperature": 0.2}
    assert plain.source_lines == [2]
    dropped, _, _ = ingest_one("litellm", path, reasoning="drop")
    assert dropped[0].messages[-1].reasoning is None


def test_a_large_pretty_printed_payload_is_detected_from_its_head(tmp_path):
    record = payload()
    record["messages"][0]["content"] = "x" * (1 << 20)
    path = tmp_path / "big.json"
    path.write_text(json.dumps(record, indent=2))
    assert looks_like_litellm(path)
    (trace,), _, _ = ingest_one("litellm", path)
    assert len(trace.messages[0].content) == 1 << 20


def test_bad_inputs_are_input_errors(tmp_path):
    truncated = tmp_path / "t.json"
    truncated.write_text(PAYLOAD.read_text()[:300])
    with pytest.raises(InputError, match=r"t\.json:\d+:\d+: truncated"):
        ingest_one("litellm", truncated)
    with pytest.raises(InputError, match="a folder; LiteLLM logs are read file by file"):
        ingest_one("litellm", LL)
    with pytest.raises(InputError, match="unknown option"):
        ingest_files("litellm", [PAYLOAD], {"choices": "first"})
    with pytest.raises(InputError, match="reasoning must be"):
        ingest_files("litellm", [PAYLOAD], {"reasoning": "later"})


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


FIELDS = ("user", "answer", "model", "id", "tool_args", "api_base", "error")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(FIELDS), planted()), min_size=1, max_size=4))
def test_no_planted_secret_reaches_the_output(plants):
    at = {field: text for field, (text, _) in plants}
    materials = [m for _, (_, m) in plants]
    record = payload()
    record["messages"][0]["content"] = at.get("user", "hi")
    reply = record["response"]["choices"][0]["message"]
    reply["content"] = at.get("answer", "hi")
    reply["tool_calls"] = [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "f", "arguments": json.dumps({"q": at.get("tool_args", "x")})},
        }
    ]
    record["response"]["model"] = at.get("model", "gpt-4o")
    record["id"] = at.get("id", "call-1")
    record["hidden_params"]["api_base"] = at.get("api_base", "https://api.openai.com")
    failed = copy.deepcopy(record)
    failed.update(status="failure", error_str=at.get("error", "boom"))
    app, runner = build_app(), CliRunner()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        source = root / "calls.jsonl"
        source.write_text(json.dumps(record) + "\n" + json.dumps(failed) + "\n")
        out = root / "out" / "traces.jsonl"
        result = runner.invoke(app, ["ingest", "-f", "litellm", str(source), "-o", str(out)])
        assert result.exit_code == 0, result.output
        written = [p.read_bytes() for p in (root / "out").iterdir()]
        assert len(written) == 2  # traces and rejects
        for material in materials:
            assert all(material.encode() not in data for data in written), material
            assert material not in result.output
