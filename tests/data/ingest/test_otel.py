import base64
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tuneloop.data.ingest.otel  # noqa: F401  (registers)
from tests.data.test_secrets_never_written import SEP, secret
from tuneloop.data.ingest import detect_format, ingest_files
from tuneloop.data.ingest.otel.otlp import any_value, hex_id, span_kind
from tuneloop.errors import InputError

from .kit import assert_ingest_hides, ingest_one

FIXTURES = Path(__file__).parents[1] / "fixtures"
REAL = FIXTURES / "otel"
OPENINFERENCE = REAL / "openinference.json"
OPENLLMETRY = REAL / "openllmetry.json"
VERCEL = REAL / "vercel_ai_sdk.json"
SYSTEM = "You are a support agent. Use the tools you are given."
CALL_ID = "call_9RtYbK2mXqLp"


def _check_lookup_call(trace) -> None:
    """The exchange every real fixture records: system + user, then one lookup_order call."""
    assert [m.role for m in trace.messages[:3]] == ["system", "user", "assistant"]
    assert trace.messages[0].content == SYSTEM
    assert trace.messages[1].content == "Where is order A-1187?"
    (call,) = trace.messages[2].tool_calls
    assert (call.id, call.name, json.loads(call.arguments)) == (
        CALL_ID,
        "lookup_order",
        {"order_id": "A-1187"},
    )
    assert trace.model == "gpt-4o-mini-2024-07-18"
    assert trace.metadata["usage"] == {"input_tokens": 412, "output_tokens": 27}
    (tool,) = trace.metadata["tools"]
    assert tool["function"]["name"] == "lookup_order"
    assert tool["function"]["parameters"]["required"] == ["order_id"]


# ---- real exports (tests/data/fixtures/otel/SOURCES.md) ---------------------------------------


def test_openinference_python_export():
    (trace,), rejects, report = ingest_one("otel", OPENINFERENCE)
    assert (report.lines_read, report.ingested, rejects, report.skipped) == (1, 1, [], {})
    _check_lookup_call(trace)
    assert len(trace.messages) == 3
    assert trace.source_id == "9ed94f9bdc36b397e11c51f77d49e01a:e9856d6fe698c4f2"
    assert trace.metadata["dialect"] == "openinference"
    assert trace.metadata["span_kind"] == "internal" and trace.metadata["status"] == "ok"
    assert trace.started_at == "2026-09-07T13:25:18.970589000Z"
    assert trace.ended_at == "2026-09-07T13:25:18.993675000Z"


def test_openllmetry_export_in_the_gen_ai_conventions():
    (trace,), rejects, report = ingest_one("otel", OPENLLMETRY)
    assert (report.lines_read, report.ingested, rejects) == (2, 1, [])
    assert report.skipped == {"non-llm span": 1}  # the support_triage.workflow span
    _check_lookup_call(trace)
    assert len(trace.messages) == 3 and trace.metadata["dialect"] == "gen_ai"
    assert trace.metadata["parent_span_id"] == "aaa24d5a6cca68bf"
    assert trace.metadata["span_kind"] == "client"
    assert trace.metadata["response_id"] == "chatcmpl-CD8yqQ2y3kZs1o0Wm7bT"
    assert trace.metadata["finish_reasons"] == ["tool_call"]


def test_vercel_ai_sdk_export_pairs_the_tool_span_and_skips_the_wrapper():
    (trace,), rejects, report = ingest_one("otel", VERCEL)
    assert (report.lines_read, report.ingested, rejects) == (3, 2, [])
    assert report.skipped == {"wrapper span": 1}  # ai.generateText over its doGenerate step
    _check_lookup_call(trace)
    assert trace.metadata["dialect"] == "vercel"
    assert trace.metadata["span_name"] == "ai.generateText.doGenerate"
    tool = trace.messages[3]  # the ai.toolCall span (record 1), answering the call by its id
    assert (tool.role, tool.tool_call_id, tool.name) == ("tool", CALL_ID, "lookup_order")
    assert json.loads(tool.content) == {"order_id": "A-1187", "status": "in transit"}
    assert trace.source_lines == [1, 2] and len(trace.messages) == 4


def test_auto_detects_the_exports_and_no_other_fixture():
    assert {detect_format(p) for p in (OPENINFERENCE, OPENLLMETRY, VERCEL)} == {"otel"}
    others = [
        p
        for p in FIXTURES.rglob("*")
        if p.is_file() and REAL not in p.parents and p.suffix in (".json", ".jsonl", ".md")
    ]
    assert others and all(detect_format(p) != "otel" for p in others)


# ---- JSONL, duplicates, unfinished spans, id spellings (derived from the real exports) ---------


def _docs() -> list[dict]:
    return [json.loads(p.read_text()) for p in (OPENINFERENCE, OPENLLMETRY, VERCEL)]


def test_jsonl_of_export_requests_with_a_repeated_export(tmp_path):
    docs = _docs()
    path = tmp_path / "spans.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in [*docs, docs[2]]) + "\n{not json\n")
    traces, rejects, report = ingest_one("otel", path)
    assert detect_format(path) == "otel"
    assert report.lines_read == 1 + 2 + 3 + 3 + 1 and report.traces == 3
    assert report.skipped == {"duplicate span": 3, "non-llm span": 1, "wrapper span": 1}
    ((line, reason),) = [(r.line, r.reason) for r in rejects]
    assert line == 10 and reason.startswith("line 6: invalid JSON")  # line 5 is blank
    vercel = next(t for t in traces if t.metadata["dialect"] == "vercel")
    assert [m.role for m in vercel.messages].count("tool") == 1  # the repeat adds nothing


def test_the_same_call_id_in_two_otel_traces_pairs_in_each(tmp_path):
    vercel = _docs()[2]
    again = json.loads(json.dumps(vercel).replace("85ebdb4d13864fa11366570a33194c67", "ab" * 16))
    path = tmp_path / "two.jsonl"
    path.write_text(json.dumps(vercel) + "\n" + json.dumps(again) + "\n")
    traces, _, report = ingest_one("otel", path)
    assert report.skipped == {"wrapper span": 2}
    assert [[m.role for m in t.messages].count("tool") for t in traces] == [1, 1]


def test_jsonl_lines_that_hold_no_span(tmp_path):
    path = tmp_path / "odd.jsonl"
    lines = [{"resourceSpans": []}, {"resourceSpans": "x"}, {"hello": 1}, [1, 2]]
    path.write_text("".join(json.dumps(x) + "\n" for x in [_docs()[0], *lines]))
    traces, rejects, report = ingest_one("otel", path)
    assert report.traces == 1 and report.skipped == {"empty export": 1}
    assert [(r.line, r.category, r.reason.split(":")[0]) for r in rejects] == [
        (3, "malformed", "line 3, resourceSpans is not a list"),
        (4, "unsupported", "line 4"),
        (5, "malformed", "line 5"),
    ]


def test_jsonl_of_flat_spans_in_three_spellings(tmp_path):
    otlp_span = _docs()[0]["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    sdk_span = {  # the Python SDK's span.to_json()
        "name": "chat gpt-4o",
        "context": {"trace_id": "0x" + "ab" * 16, "span_id": "0x" + "cd" * 8},
        "kind": "SpanKind.CLIENT",
        "parent_id": None,
        "start_time": "2026-01-02T03:04:05.000000Z",
        "end_time": "2026-01-02T03:04:06.000000Z",
        "attributes": {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.input.messages": json.dumps([{"role": "user", "content": "hi"}]),
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": "hello"}]),
        },
        "resource": {"attributes": {"service.name": "svc"}},
    }
    phoenix_span = {  # nested attributes, as Phoenix and the OpenInference spec write them
        "name": "llm",
        "context": {"trace_id": "11" * 16, "span_id": "22" * 8},
        "span_kind": "LLM",
        "start_time": "2024-01-11T16:45:17.982858-07:00",
        "end_time": "2024-01-11T16:45:18.517639-07:00",
        "attributes": {
            "llm": {
                "model_name": "gpt-4",
                "input_messages": [{"message": {"role": "user", "content": "2+2?"}}],
                "output_messages": [{"message": {"role": "assistant", "content": "4"}}],
            }
        },
    }
    path = tmp_path / "flat.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in (otlp_span, sdk_span, phoenix_span)))
    traces, rejects, report = ingest_one("otel", path)
    assert detect_format(path) == "otel" and rejects == [] and report.traces == 3
    oi, sdk, phoenix = traces
    _check_lookup_call(oi)
    assert sdk.source_id == "ab" * 16 + ":" + "cd" * 8 and sdk.metadata["span_kind"] == "client"
    assert [m.content for m in sdk.messages] == ["hi", "hello"] and sdk.model == "gpt-4o"
    assert sdk.metadata["service"] == "svc" and sdk.started_at == "2026-01-02T03:04:05.000000Z"
    assert [m.content for m in phoenix.messages] == ["2+2?", "4"] and phoenix.model == "gpt-4"


def test_base64_ids_unfinished_and_finished_copies(tmp_path):
    doc = _docs()[1]
    llm = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    for key, size in (("traceId", 16), ("spanId", 8), ("parentSpanId", 8)):
        llm[key] = base64.b64encode(bytes.fromhex(llm[key])).decode()
        assert len(llm[key]) == (24 if size == 16 else 12)
    pending = json.loads(json.dumps(llm)) | {"endTimeUnixNano": "0"}
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"] = [llm, pending]
    workflow = doc["resourceSpans"][1]["scopeSpans"][0]["spans"][0]
    del workflow["endTimeUnixNano"]
    path = tmp_path / "export.json"
    path.write_text(json.dumps(doc, indent=1))
    (trace,), _, report = ingest_one("otel", path)
    assert trace.source_id == "77d66be22a4ffc8149309684b3a319f7:76a26812b532f640"
    assert trace.metadata["parent_span_id"] == "aaa24d5a6cca68bf"
    assert trace.source_lines == [1]  # the finished copy, read first, is kept
    assert report.skipped == {"duplicate span": 1, "unfinished span": 1}


# ---- dialects and decisions --------------------------------------------------------------------


def _span(attrs: dict, name: str = "chat", span_id: str = "01" * 8, **extra) -> dict:
    def value(v):
        if isinstance(v, bool):
            return {"boolValue": v}
        if isinstance(v, int):
            return {"intValue": str(v)}
        return {"stringValue": v}

    return {
        "traceId": "0f" * 16,
        "spanId": span_id,
        "name": name,
        "kind": "SPAN_KIND_CLIENT",
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000001000000000",
        "attributes": [{"key": k, "value": value(v)} for k, v in attrs.items()],
        **extra,
    }


def _export(tmp_path: Path, *spans: dict) -> Path:
    path = tmp_path / "export.json"
    doc = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": list(spans)}]}]}
    path.write_text(json.dumps(doc, indent=2))
    return path


def test_openllmetry_indexed_attributes_and_results_paired_by_order(tmp_path):
    span = _span(
        {
            "llm.request.type": "chat",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "weather in Paris?",
            "gen_ai.prompt.1.role": "assistant",
            "gen_ai.prompt.1.tool_calls.0.id": "c1",
            "gen_ai.prompt.1.tool_calls.0.name": "weather",
            "gen_ai.prompt.1.tool_calls.0.arguments": '{"city": "Paris"}',
            "gen_ai.prompt.2.role": "tool",
            "gen_ai.prompt.2.content": "18C",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": json.dumps([{"type": "text", "text": "It is 18C."}]),
            "gen_ai.usage.prompt_tokens": 20,
        }
    )
    (trace,), _, _ = ingest_one("otel", _export(tmp_path, span))
    assert [m.role for m in trace.messages] == ["user", "assistant", "tool", "assistant"]
    assert trace.messages[2].tool_call_id == "c1"  # no id logged: the call before it, by order
    assert trace.messages[3].content == "It is 18C."
    assert trace.metadata["dialect"] == "openllmetry"
    assert trace.metadata["usage"] == {"input_tokens": 20}


def test_gen_ai_parts_with_reasoning_and_tool_responses(tmp_path):
    inputs = [
        {"role": "user", "parts": [{"type": "text", "content": "add 2 and 3"}]},
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": "t1", "name": "add", "arguments": {"a": 2}}],
        },
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "t1", "response": 5}]},
    ]
    output = [
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "content": "the tool said 5"},
                {"type": "text", "content": "5"},
            ],
        }
    ]
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Be brief."}]),
        "gen_ai.input.messages": json.dumps(inputs),
        "gen_ai.output.messages": json.dumps(output),
    }
    path = _export(tmp_path, _span(attrs))
    (trace,), _, _ = ingest_one("otel", path)
    assert [m.role for m in trace.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert trace.messages[0].content == "Be brief."
    assert (trace.messages[3].tool_call_id, trace.messages[3].content) == ("t1", "5")
    assert trace.messages[4].reasoning == "the tool said 5"
    (dropped,), _, _ = ingest_one("otel", path, **{"reasoning": "drop"})
    assert dropped.messages[4].reasoning is None and dropped.messages[4].content == "5"


def test_mlflow_chat_messages_with_the_answer_last(tmp_path):
    """Written from MLflow's serializer (`mlflow.tracing.set_span_chat_messages`: the input
    messages plus the output message, every attribute value JSON-encoded); no real export."""
    messages = [
        {"role": "user", "content": "What is MLflow?"},
        {"role": "assistant", "content": "An open source MLOps platform."},
    ]
    attrs = {
        "mlflow.spanType": json.dumps("CHAT_MODEL"),
        "mlflow.spanInputs": json.dumps({"messages": messages[:1], "model": "gpt-4o-mini"}),
        "mlflow.spanOutputs": json.dumps({"model": "gpt-4o-mini-2024-07-18", "choices": []}),
        "mlflow.chat.messages": json.dumps(messages),
        "mlflow.chat.tools": json.dumps([{"type": "function", "function": {"name": "search"}}]),
    }
    tool = {"mlflow.spanType": json.dumps("TOOL"), "mlflow.spanInputs": json.dumps({"q": 1})}
    (trace,), _, report = ingest_one(
        "otel", _export(tmp_path, _span(attrs), _span(tool, span_id="02" * 8))
    )
    assert [m.content for m in trace.messages] == [m["content"] for m in messages]
    assert trace.model == "gpt-4o-mini-2024-07-18" and trace.metadata["dialect"] == "mlflow"
    assert trace.metadata["tools"] == [{"type": "function", "function": {"name": "search"}}]
    assert report.skipped == {"unpaired tool span": 1}


def test_spans_that_make_no_trace_are_counted_by_kind(tmp_path):
    call = {"role": "assistant", "tool_calls": [_openai_call("k1", "search")]}
    spans = [
        _span({"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}, span_id="01" * 8),
        _span({"http.request.method": "POST"}, name="POST", span_id="02" * 8),
        _span(
            {
                "gen_ai.input.messages": json.dumps([{"role": "user", "content": "go"}]),
                "gen_ai.output.messages": json.dumps([call]),
            },
            span_id="03" * 8,
        ),
        _span(
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.call.id": "k1",
                "gen_ai.tool.name": "search",
                "gen_ai.tool.call.result": "found",
            },
            span_id="04" * 8,
        ),
        _span(
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.id": "zz"}, span_id="05" * 8
        ),
        _span({"gen_ai.input.messages": "[not json"}, span_id="06" * 8),
        _span(
            {"gen_ai.input.messages": json.dumps([{"role": "user", "content": "x"}])},
            span_id="07" * 8,
        ),
    ]
    traces, rejects, report = ingest_one("otel", _export(tmp_path, *spans))
    assert report.skipped == {
        "llm span without content": 1,
        "non-llm span": 1,
        "unpaired tool span": 1,
        "llm span without output": 1,
    }
    ((reject),) = rejects
    assert reject.line == 6 and reject.category == "malformed"
    assert "spans[5]: gen_ai.input.messages is not JSON" in reject.reason
    (trace,) = traces
    assert [m.role for m in trace.messages] == ["user", "assistant", "tool"]
    assert trace.messages[2].content == "found" and trace.source_lines == [3, 4]


def _openai_call(call_id: str, name: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def test_value_id_and_kind_spellings():
    assert any_value({"intValue": "42"}) == 42 and any_value({"intValue": 42}) == 42
    assert any_value({"arrayValue": {"values": [{"stringValue": "a"}, {"boolValue": True}]}}) == [
        "a",
        True,
    ]
    kv = {"kvlistValue": {"values": [{"key": "k", "value": {"doubleValue": 0.5}}]}}
    assert any_value(kv) == {"k": 0.5} and any_value({}) is None
    assert hex_id("0xABCDEF0123456789", 8) == "abcdef0123456789"
    assert hex_id(base64.b64encode(bytes(range(16))).decode(), 16) == bytes(range(16)).hex()
    assert hex_id(255, 8) == "00000000000000ff" and hex_id("", 8) is None
    assert [span_kind(k) for k in (3, "SPAN_KIND_SERVER", "SpanKind.INTERNAL", None)] == [
        "client",
        "server",
        "internal",
        None,
    ]


def test_bad_input_is_refused_with_the_file(tmp_path):
    with pytest.raises(InputError, match="unknown option"):
        ingest_files("otel", [OPENINFERENCE], {"choices": "all"})
    with pytest.raises(InputError, match="reasoning must be"):
        ingest_files("otel", [OPENINFERENCE], {"reasoning": "sometimes"})
    cut = tmp_path / "cut.json"
    cut.write_text(OPENINFERENCE.read_text()[:500])
    with pytest.raises(InputError, match=r"cut\.json:\d+:\d+: truncated"):
        ingest_files("otel", [cut])
    other = tmp_path / "other.json"
    other.write_text('{\n  "messages": []\n}\n')
    with pytest.raises(InputError, match="not an OTLP trace export"):
        ingest_files("otel", [other])
    with pytest.raises(InputError, match="a folder"):
        ingest_files("otel", [REAL])


# ---- no planted secret is written ---------------------------------------------------------------

PLACES = ["system", "user", "arguments", "result", "answer", "model", "service", "attr_key"]


@st.composite
def planted_export(draw) -> tuple[dict, list[str]]:
    planted: dict[str, str] = {}
    materials: list[str] = []
    for place in draw(st.lists(st.sampled_from(PLACES), min_size=1, max_size=4, unique=True)):
        text, material = draw(secret())
        planted[place] = draw(SEP) + text + draw(SEP)
        materials.append(material or text.rsplit(" ", 1)[-1].split("=")[-1].strip())

    def at(place: str) -> str:
        return planted.get(place, place)

    inputs = [
        {"role": "system", "content": at("system")},
        {"role": "user", "content": at("user")},
        {"role": "assistant", "tool_calls": [_openai_call("c1", "lookup")]},
        {"role": "tool", "tool_call_id": "c1", "content": at("result")},
    ]
    inputs[2]["tool_calls"][0]["function"]["arguments"] = json.dumps({"q": at("arguments")})
    attrs = {
        "gen_ai.request.model": at("model"),
        "gen_ai.input.messages": json.dumps(inputs),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": at("answer")}]),
        f"app.{at('attr_key')}": "x",
    }
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": at("service")}}]}
    doc = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": [_span(attrs)]}]}]}
    return doc, materials


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(planted_export())
def test_no_planted_secret_reaches_the_ingest_output(case) -> None:
    doc, materials = case
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "export.json"
        src.write_text(json.dumps(doc, indent=2))
        out = Path(tmp) / "out" / "t.jsonl"
        assert_ingest_hides("otel", [src], out, materials)
