"""OTLP JSON → `Span`s: the file shapes, the value encodings and the id spellings exporters use.

    got = read_spans(Path("export.json"))   # Read(spans, rejects, skipped, records)

Shapes read: one OTLP/JSON `ExportTraceServiceRequest` document (`{"resourceSpans": [...]}`,
as a collector's file exporter, Phoenix or a SDK's JSON exporter writes it), a JSON array of
such requests or of spans, and JSONL of either (one request or one span per line). A span may be
an OTLP span object (camelCase, or the snake_case proto field names) or the flat dict the Python
SDK's `span.to_json()` and Phoenix write (`context.trace_id`, `start_time` ISO strings,
`attributes` as a plain — possibly nested — dict).

Quirks absorbed: `intValue` as a string (the proto JSON mapping) or a number (the JS exporter);
`arrayValue`/`kvlistValue` decoded to lists/dicts; ids as hex, `0x`-prefixed hex, or base64
(the proto JSON mapping of `bytes`), all turned into lowercase hex; span `kind` as an int, as
`SPAN_KIND_CLIENT` or as `SpanKind.CLIENT`; times as nanosecond strings or numbers, or ISO
strings; a span with no end time (or 0) is unfinished (`Span.end` None). Nested attribute values
(`{"llm.input_messages": [{"message.role": ...}]}`) are also flattened to the dotted keys the
OTLP form uses (`llm.input_messages.0.message.role`), so the dialect readers see one spelling.

Records: every span read is a record, numbered from 1 in file order; a line (JSONL) or an array
item that is not JSON, not an object, or neither a request nor a span is one record too, and is
rejected; a request line with no spans is one record, skipped as `empty export`. A reject's
position is the record number, and its reason says where the record is (`line 4`,
`resourceSpans[0].scopeSpans[1].spans[2]`).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tuneloop.data.ingest.base import Reject, excerpt, read_json_lines
from tuneloop.data.ingest.chat import iso_time
from tuneloop.data.ingest.documents import load_json_document
from tuneloop.errors import InputError

KINDS = ("unspecified", "internal", "server", "client", "producer", "consumer")
_ANY_VALUE = {
    f"{spelling}": kind
    for kind in ("string", "int", "double", "bool", "array", "kvlist", "bytes")
    for spelling in (f"{kind}Value", f"{kind}_value")
}
"""The keys of an OTLP `AnyValue` (proto JSON mapping, or proto field names) → the kind."""


@dataclass
class Span:
    """One span, decoded: ids as lowercase hex, times as ISO 8601, attributes as a flat dict."""

    record: int
    where: str
    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    kind: str | None
    start: str | None
    end: str | None
    """None: the span was exported before it ended (unfinished)."""
    status: str | None
    attrs: dict[str, Any]
    resource: dict[str, Any]
    scope: str | None
    raw: dict[str, Any] = field(repr=False)


@dataclass
class Read:
    """What a file held: its spans, its unreadable records, and the records skipped."""

    spans: list[Span] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    records: int = 0


def read_spans(path: Path) -> Read:
    """Every span of an OTLP JSON or JSONL file (see the module docstring)."""
    out = Read()
    if _first_line_is_object(path):
        _read_lines(path, out)
    else:
        doc = load_json_document(path)
        if isinstance(doc, list):
            for i, item in enumerate(doc):
                _read_item(str(path), item, f"[{i}]", out)
        elif isinstance(doc, dict) and (_requests(doc) is not None or is_flat_span(doc)):
            _read_item(str(path), doc, "", out)
        else:
            raise InputError(
                f'{path}: not an OTLP trace export (expected {{"resourceSpans": [...]}}, '
                "a JSON array of spans, or JSONL of either)"
            )
    return out


def _first_line_is_object(path: Path) -> bool:
    """Whether the first non-blank line is a whole JSON object (JSONL), not a document's `{`."""
    with Path(path).open("rb") as fh:
        for raw in fh:
            if raw.strip():
                return raw.strip().startswith(b"{") and raw.rstrip().endswith(b"}")
    return False


def _read_lines(path: Path, out: Read) -> None:
    bad: list[Reject] = []
    items = list(read_json_lines(path, bad))
    rows: list[tuple[int, dict[str, Any] | Reject]] = [*items, *((r.line, r) for r in bad)]
    for lineno, item in sorted(rows, key=lambda row: row[0]):
        if isinstance(item, Reject):
            out.records += 1
            reason = f"line {lineno}: {item.reason}"
            out.rejects.append(Reject(item.file, out.records, reason, excerpt=item.excerpt))
        else:
            _read_item(str(path), item, f"line {lineno}", out)


def _read_item(file: str, item: Any, where: str, out: Read) -> None:
    requests = _requests(item) if isinstance(item, dict) else None
    if requests is not None:
        before = out.records
        _read_request(file, requests, item, where, out)
        if out.records == before:
            out.records += 1
            out.skipped["empty export"] += 1
        return
    if not isinstance(item, dict) or not is_flat_span(item):
        out.records += 1
        what = "an object" if isinstance(item, dict) else type(item).__name__
        reason = f"{where}: {what} that is neither an OTLP export request nor a span"
        reject = Reject(file, out.records, reason.lstrip(": "), "unsupported", excerpt(item))
        out.rejects.append(reject)
        return
    resource: dict[str, Any] = item["resource"] if isinstance(item.get("resource"), dict) else {}
    _add_span(file, item, where, attributes(resource.get("attributes")), None, out)


def _requests(obj: dict[str, Any]) -> Any:
    return obj.get("resourceSpans", obj.get("resource_spans"))


def _read_request(file: str, resource_spans: Any, item: Any, where: str, out: Read) -> None:
    at = f"{where}, " if where else ""
    if not isinstance(resource_spans, list):
        out.records += 1
        reason = f"{at}resourceSpans is not a list"
        out.rejects.append(Reject(file, out.records, reason, excerpt=excerpt(item)))
        return
    for i, rs in enumerate(resource_spans):
        place = f"{at}resourceSpans[{i}]"
        groups = rs.get("scopeSpans", rs.get("scope_spans")) if isinstance(rs, dict) else None
        if not isinstance(groups, list):
            out.records += 1
            reason = f"{place}: no scopeSpans list"
            out.rejects.append(Reject(file, out.records, reason, excerpt=excerpt(rs or item)))
            continue
        resource = rs.get("resource") if isinstance(rs.get("resource"), dict) else {}
        res_attrs = attributes(resource.get("attributes"))
        for j, group in enumerate(groups):
            spans = group.get("spans") if isinstance(group, dict) else None
            scope = group.get("scope") if isinstance(group, dict) else None
            scope_name = scope.get("name") if isinstance(scope, dict) else None
            for k, span in enumerate(spans if isinstance(spans, list) else []):
                span_at = f"{place}.scopeSpans[{j}].spans[{k}]"
                _add_span(file, span, span_at, res_attrs, scope_name, out)


def _add_span(
    file: str, obj: Any, where: str, resource: dict[str, Any], scope: str | None, out: Read
) -> None:
    out.records += 1
    if not isinstance(obj, dict):
        reason = f"{where}: a span must be an object (got {type(obj).__name__})"
        out.rejects.append(Reject(file, out.records, reason, excerpt=excerpt(obj)))
        return
    context: dict[str, Any] = obj["context"] if isinstance(obj.get("context"), dict) else {}
    trace_id = hex_id(_first(obj, context, "traceId", "trace_id"), 16)
    span_id = hex_id(_first(obj, context, "spanId", "span_id"), 8)
    if trace_id is None or span_id is None:
        reason = f"{where}: span without a traceId and spanId"
        out.rejects.append(Reject(file, out.records, reason, excerpt=excerpt(obj)))
        return
    attrs = attributes(obj.get("attributes"))
    if isinstance(obj.get("span_kind"), str):  # Phoenix: the OpenInference kind beside the span
        attrs.setdefault("openinference.span.kind", obj["span_kind"])
    out.spans.append(
        Span(
            record=out.records,
            where=where,
            trace_id=trace_id,
            span_id=span_id,
            parent_id=hex_id(_first(obj, {}, "parentSpanId", "parent_span_id", "parent_id"), 8),
            name=str(obj.get("name") or ""),
            kind=span_kind(obj.get("kind")),
            start=_time(obj, "startTimeUnixNano", "start_time_unix_nano", "start_time"),
            end=_time(obj, "endTimeUnixNano", "end_time_unix_nano", "end_time"),
            status=_status(obj),
            attrs=attrs,
            resource=resource,
            scope=scope,
            raw=obj,
        )
    )


def _first(obj: dict[str, Any], context: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        for where in (obj, context):
            if where.get(key) not in (None, ""):
                return where[key]
    return None


def is_flat_span(obj: dict[str, Any]) -> bool:
    """Whether a JSON object is one span (OTLP span object or an SDK's span dict)."""
    context: dict[str, Any] = obj["context"] if isinstance(obj.get("context"), dict) else {}
    return (
        "name" in obj
        and _first(obj, context, "traceId", "trace_id") is not None
        and _first(obj, context, "spanId", "span_id") is not None
    )


def is_export(obj: dict[str, Any]) -> bool:
    """Whether a JSON object is an OTLP export request."""
    return isinstance(_requests(obj), list)


def any_value(value: Any) -> Any:
    """The plain value of an OTLP `AnyValue` (`{"stringValue": …}`, …); others as given."""
    if not isinstance(value, dict) or not set(value) <= _ANY_VALUE.keys():
        return value
    for key, got in value.items():
        kind = _ANY_VALUE[key]
        if kind == "int":
            try:
                return int(got)
            except (TypeError, ValueError):
                return got
        if kind == "double":
            return float(got) if isinstance(got, (int, float, str)) else got
        if kind in ("array", "kvlist"):
            values = got.get("values") if isinstance(got, dict) else None
            return [any_value(v) for v in values or []] if kind == "array" else attributes(values)
        return got
    return None  # `{}`: an empty AnyValue


def attributes(raw: Any) -> dict[str, Any]:
    """OTLP `[{key, value}]` or a plain dict → a flat dict (nested values also dotted)."""
    if isinstance(raw, list):
        attrs = {
            str(kv["key"]): any_value(kv.get("value"))
            for kv in raw
            if isinstance(kv, dict) and "key" in kv
        }
    elif isinstance(raw, dict):
        attrs = dict(raw)
    else:
        return {}
    for key, value in list(attrs.items()):
        if isinstance(value, (dict, list)):
            for sub, leaf in _flatten(value, key):
                attrs.setdefault(sub, leaf)
    return attrs


def _flatten(value: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, child in items:
        name = f"{prefix}.{key}"
        if isinstance(child, (dict, list)):
            yield from _flatten(child, name)
        else:
            yield name, child


def hex_id(value: Any, size: int) -> str | None:
    """A trace (16 bytes) or span (8 bytes) id as lowercase hex, from hex, 0x-hex, base64 or an
    int; an id in any other spelling is kept as given; None when there is none."""
    if isinstance(value, int) and not isinstance(value, bool):
        return format(value, f"0{2 * size}x")
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    bare = text[2:] if text.lower().startswith("0x") else text
    if re.fullmatch(rf"[0-9a-fA-F]{{{2 * size}}}", bare):
        return bare.lower()
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return text
    return raw.hex() if len(raw) == size else text


def span_kind(value: Any) -> str | None:
    """`client`, `internal`, ... from 3, `SPAN_KIND_CLIENT`, `SpanKind.CLIENT` or `CLIENT`."""
    if isinstance(value, int) and not isinstance(value, bool):
        return KINDS[value] if 0 <= value < len(KINDS) else str(value)
    if isinstance(value, str) and value:
        name = value.rsplit(".", 1)[-1].upper().removeprefix("SPAN_KIND_")
        return name.lower()
    return None


def _time(obj: dict[str, Any], nano: str, snake: str, iso: str) -> str | None:
    value = obj.get(nano, obj.get(snake))
    if value is not None:
        try:
            ns = int(value)
        except (TypeError, ValueError):
            return None
        if ns <= 0:
            return None  # proto3's default: the span had not ended when it was exported
        when = datetime.fromtimestamp(ns // 1_000_000_000, tz=timezone.utc)
        stamp = when.strftime("%Y-%m-%dT%H:%M:%S")
        return f"{stamp}.{ns % 1_000_000_000:09d}Z"
    return iso_time(obj.get(iso))


def _status(obj: dict[str, Any]) -> str | None:
    status = obj.get("status")
    code = status.get("code", status.get("status_code")) if isinstance(status, dict) else None
    code = code if code is not None else obj.get("status_code")
    if isinstance(code, int) and not isinstance(code, bool):
        return ("unset", "ok", "error")[code] if 0 <= code <= 2 else str(code)
    if isinstance(code, str) and code:
        return code.upper().removeprefix("STATUS_CODE_").lower()
    return None
