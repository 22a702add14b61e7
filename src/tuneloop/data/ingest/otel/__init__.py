"""Ingester `otel`: OpenTelemetry GenAI spans, as Langfuse, Arize Phoenix, OpenLLMetry
(traceloop), MLflow tracing, the Vercel AI SDK or a collector's file exporter export them.

Run: `tuneloop ingest --format otel export.json --out t.jsonl` (an OTLP/JSON export request, a
JSON array of spans, or JSONL of either: `otlp.py`); `--format auto` recognises them.

One model call is one trace. Every span that records a model call (`dialects.py`: the
`gen_ai.*` conventions, OpenLLMetry's indexed attributes, OpenInference, the Vercel AI SDK)
becomes a trace of the messages it was sent and the first answer it returned, with the model,
the span's start and end, and `metadata` naming the OTel trace and span ids, the span, the
service, the dialect, token usage, finish reasons and the tools offered. `source_id` is
`<traceId>:<spanId>`; `source_lines` is the span's record number (`otlp.py`).

Deliberately not one trace per OTel trace: an agent's every model call already carries the
whole conversation before it as input, so a trace per call is the conversation at that step
(what a gateway log holds, and what `openai_chat` makes of one), and one OTel trace often holds
calls of different conversations (a router's classification, then the answer) that merging
would wrongly join. `metadata.trace_id` groups them again where that is wanted.

Spans that are not turned into a trace, by kind:
- `duplicate span`: a (traceId, spanId) read before (exporters retry; a span exported unfinished
  and again finished): the finished copy read last is kept;
- `unfinished span`: no end time, and no finished copy in the file;
- `wrapper span`: a model-call span with a model-call span beneath it (the Vercel AI SDK's
  `ai.generateText` over its `doGenerate` steps; a LangChain `ChatOpenAI` span over the OpenAI
  SDK's): the innermost call, closest to the wire, is the trace;
- `llm span without content`: the instrumentation did not capture message content (the
  default of several) — nothing to learn from; `llm span without output`: the call failed or
  its answer was not captured;
- tool execution spans (`execute_tool`, OpenInference `TOOL`, `ai.toolCall`): when the span
  names the id of a call the model made in a trace built here (same OTel trace), its result is
  appended to that trace as the `tool` message answering the call (merged); otherwise
  `unpaired tool span`;
- `non-llm span`: HTTP, database, framework and agent spans.
A span whose message attributes cannot be read (not JSON, a message without a role) is
rejected (`malformed`) with its record number and place. Option `reasoning: drop` leaves out
the reasoning text the spans carry (default `keep`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tuneloop.data.ingest.base import Reject, check_options, excerpt
from tuneloop.data.ingest.chat import BadMessage
from tuneloop.data.ingest.detect import sniff_lines, sniff_text
from tuneloop.data.ingest.documents import Parsed, document_ingester
from tuneloop.data.ingest.otel.dialects import read_call, span_role
from tuneloop.data.ingest.otel.otlp import Span, is_export, is_flat_span, read_spans
from tuneloop.errors import InputError
from tuneloop.plugins import DocumentConverter
from tuneloop.records.trace import Message, Trace

__all__ = ["looks_like_otel", "otel"]


def looks_like_otel(path: Path) -> bool:
    """An OTLP JSON export, or JSONL of export requests or spans (decided from the start)."""
    if not path.is_file():
        return False
    head = sniff_text(path, 1 << 16).lstrip()
    first = head.split("\n", 1)[0].strip()
    if first.startswith("{") and first.endswith("}"):  # JSONL: every sniffed line a span
        lines = sniff_lines(path)
        return bool(lines) and all(is_export(o) or is_flat_span(o) for o in lines)
    return head[:1] in ("{", "[") and re.search(r'"resource_?[sS]pans"\s*:', head) is not None


@document_ingester("otel", detect=looks_like_otel)
def otel(**options: Any) -> DocumentConverter:
    """OpenTelemetry GenAI spans: one trace per model call, tool results paired by call id."""
    check_options("otel", options, {"reasoning"})
    if options.get("reasoning", "keep") not in ("keep", "drop"):
        raise InputError("ingester 'otel': option reasoning must be 'keep' or 'drop'")
    keep_reasoning = options.get("reasoning", "keep") == "keep"

    def convert(source: Path) -> Parsed:
        if source.is_dir():
            raise InputError(f"{source}: a folder; give its export files, or --format auto")
        read = read_spans(source)
        parsed = Parsed(rejects=read.rejects, skipped=read.skipped, records=read.records)
        spans = _finished(_unique(read.spans, parsed), parsed)
        roles = {_key(s): span_role(s.attrs) for s in spans}
        wrappers = _wrappers(spans, roles)
        tools: list[Span] = []
        for span in spans:
            role = roles[_key(span)]
            if role == "llm" and _key(span) in wrappers:
                parsed.skip("wrapper span")
            elif role == "llm":
                _call_trace(str(source), span, keep_reasoning, parsed)
            elif role == "tool":
                tools.append(span)
            else:
                parsed.skip("non-llm span")
        _pair_tools(tools, parsed)
        return parsed

    return convert


def _key(span: Span) -> tuple[str, str]:
    return span.trace_id, span.span_id


def _unique(spans: list[Span], parsed: Parsed) -> list[Span]:
    """One copy of each (traceId, spanId): the finished one read last, else the last read."""
    chosen: dict[tuple[str, str], Span] = {}
    for span in spans:
        held = chosen.get(_key(span))
        if held is not None:
            parsed.skip("duplicate span")
            if held.end is not None and span.end is None:
                continue
        chosen[_key(span)] = span
    return sorted(chosen.values(), key=lambda s: s.record)


def _finished(spans: list[Span], parsed: Parsed) -> list[Span]:
    for span in spans:
        if span.end is None:
            parsed.skip("unfinished span")
    return [s for s in spans if s.end is not None]


def _wrappers(spans: list[Span], roles: Mapping[tuple[str, str], str]) -> set[tuple[str, str]]:
    """Model-call spans with a model-call span beneath them (see the module docstring)."""
    parent = {_key(s): (s.trace_id, s.parent_id) for s in spans if s.parent_id}
    out: set[tuple[str, str]] = set()
    for span in spans:
        if roles[_key(span)] != "llm":
            continue
        node, seen = parent.get(_key(span)), set()
        while node is not None and node not in seen:
            seen.add(node)
            if roles.get(node) == "llm":
                out.add(node)
            node = parent.get(node)
    return out


def _call_trace(file: str, span: Span, keep_reasoning: bool, parsed: Parsed) -> None:
    try:
        call = read_call(span.attrs)
    except BadMessage as err:
        reason = f"{span.where}: {err}"
        parsed.rejects.append(Reject(file, span.record, reason, "malformed", excerpt(span.raw)))
        return
    if call is None:
        parsed.skip("llm span without content")
        return
    if call.output is None:
        parsed.skip("llm span without output")
        return
    messages = [*call.inputs, call.output]
    if not keep_reasoning:
        for message in messages:
            message.reasoning = None
    parsed.traces.append(
        Trace(
            source="otel",
            source_id=f"{span.trace_id}:{span.span_id}",
            source_file=file,
            source_lines=[span.record],
            messages=messages,
            model=call.model,
            started_at=span.start,
            ended_at=span.end,
            metadata={**_span_metadata(span), "dialect": call.dialect, **call.extras},
        )
    )


def _span_metadata(span: Span) -> dict[str, Any]:
    meta = {
        "trace_id": span.trace_id,
        "span_id": span.span_id,
        "parent_span_id": span.parent_id,
        "span_name": span.name,
        "span_kind": span.kind,
        "scope": span.scope,
        "service": span.resource.get("service.name"),
        "status": span.status,
        "session_id": next(
            (
                span.attrs[k]
                for k in ("gen_ai.conversation.id", "session.id", "langfuse.session.id")
                if isinstance(span.attrs.get(k), str)
            ),
            None,
        ),
    }
    return {k: v for k, v in meta.items() if v is not None}


def _pair_tools(tools: list[Span], parsed: Parsed) -> None:
    """Append each tool span's result to the trace whose last answer made that call."""
    calls: dict[tuple[str, str], Trace] = {}
    for trace in parsed.traces:
        last = trace.messages[-1]
        for call in last.tool_calls or []:
            calls[(trace.metadata["trace_id"], call.id)] = trace
    paired: set[tuple[str, str]] = set()
    for span in tools:
        call_id, name, result = _tool_result(span.attrs)
        key = (span.trace_id, call_id or "")
        owner = calls.get(key)
        if owner is None or key in paired:  # a second result for one call pairs with nothing
            parsed.skip("unpaired tool span")
            continue
        paired.add(key)
        owner.messages.append(Message(role="tool", content=result, tool_call_id=call_id, name=name))
        owner.source_lines.append(span.record)
    for trace in {id(t): t for t in calls.values()}.values():
        order = {c.id: i for i, c in enumerate(trace.messages[-1].tool_calls or [])}
        _order_results(trace, order)


def _order_results(trace: Trace, order: dict[str, int]) -> None:
    """Sort the tool messages appended after the answer by the answer's call order."""
    end = max(i for i, m in enumerate(trace.messages) if m.role == "assistant")
    tail = sorted(trace.messages[end + 1 :], key=lambda m: order.get(m.tool_call_id or "", 0))
    trace.messages[end + 1 :] = tail
    trace.source_lines.sort()


def _tool_result(attrs: dict[str, Any]) -> tuple[str | None, str | None, str]:
    """(call id, tool name, result text) of a tool execution span, in any dialect."""
    call_id = next(
        (
            str(attrs[k])
            for k in ("gen_ai.tool.call.id", "ai.toolCall.id", "tool_call.id", "tool.call_id")
            if attrs.get(k) is not None
        ),
        None,
    )
    name = next(
        (
            str(attrs[k])
            for k in ("gen_ai.tool.name", "ai.toolCall.name", "tool.name")
            if attrs.get(k) is not None
        ),
        None,
    )
    result = next(
        (
            attrs[k]
            for k in ("gen_ai.tool.call.result", "ai.toolCall.result", "ai.toolCall.output",
                      "output.value")
            if attrs.get(k) is not None
        ),
        "",
    )  # fmt: skip
    text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
    return call_id, name, text
