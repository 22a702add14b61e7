"""Ingester `litellm`: LiteLLM and gateway completion logs, one JSON record per LLM call.

Run: `tuneloop ingest --format litellm gcs-bucket/2025-01-24/*.json --out t.jsonl` (or a JSONL
file of records, or `--format auto` on the bucket folder).

A record is a call logged with its request and response, in either shape:
- LiteLLM's `StandardLoggingPayload` (`id`, `call_type`, `status`, `messages`, `response`,
  `model_parameters`, `response_cost`, `startTime`/`endTime`, `error_str`, …) as its logging
  callbacks write it: one object per file (the GCS and S3 bucket loggers, named by response
  id), or wrapped as `{"standard_logging_object": …}` / `{"kwargs": {"standard_logging_object":
  …}}` by a custom callback that dumps its kwargs;
- a gateway completion log `{messages, tools, kwargs, response, cost, timestamp,
  latency_sec}` as OpenHands' LLM layer (over LiteLLM) writes one file per call.
A file holds one record (a JSON object), a list of them (a JSON array), or one per line
(JSONL: when its first non-blank line is a whole JSON object). Records are numbered from 1: a
JSONL record by its line, a list item by its place, a lone object is record 1.

One call → one trace per response choice (`<id>#<i>` when there are several): the request
messages, then the choice's message. A call is a trace of its own, deliberately: an agent's
later calls repeat the earlier ones as their prompt, and every call's tool calls and results
are already paired by id inside its own request (the tool messages name the calls they
answer); the response's own tool calls are answered in the next call. `metadata` keeps the
cost (`cost_usd`), token counts, LiteLLM's `trace_id` (the calls of one request), the call id,
model group, cache hit, finish reason, and the request's other parameters; the tools offered go
to `metadata.tools` (OpenAI entries). Option `reasoning: keep|drop` (default keep) keeps or
drops the response's `reasoning_content`.

Rejected: failed calls (`status: failure`, or an `error_str`) as `dropped` with the error;
calls whose messages or response LiteLLM redacted (`redacted-by-litellm`) as `dropped`;
calls that are not chat completions (embeddings, text completions, Responses API, images,
…) as `unsupported`; records without messages and response as `malformed`. A folder is not a
source (its calls are separate records in separate files): give its files, or `--format auto`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tuneloop.data.ingest.base import Category, Reject, check_options, excerpt, read_json_lines
from tuneloop.data.ingest.chat import BadMessage, iso_time, to_messages
from tuneloop.data.ingest.detect import SNIFF_BYTES, sniff_lines, sniff_text
from tuneloop.data.ingest.documents import Parsed, document_ingester, load_json_document
from tuneloop.errors import InputError
from tuneloop.plugins import DocumentConverter
from tuneloop.records.trace import Message, Trace

CHAT_CALLS = {None, "completion", "acompletion"}
REDACTED = "redacted-by-litellm"
PAYLOAD_KEYS = ("call_type", "response_cost", "standard_logging_object")
LOG_KEYS = ("cost", "kwargs", "latency_sec")
"""Keys that, beside `messages` and `response`, mark a gateway completion log."""
Record = tuple[int, Any]
_PAYLOAD_HEAD = re.compile(r'"(call_type|response_cost|standard_logging_object|messages)"\s*:')


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def payload_of(record: dict[str, Any]) -> dict[str, Any]:
    """The logged call inside a record (unwrapping a callback's dumped kwargs)."""
    for holder in (record, _obj(record.get("kwargs"))):
        if isinstance(holder.get("standard_logging_object"), dict):
            return holder["standard_logging_object"]
    return record


def is_call_record(record: Any) -> bool:
    """Whether a JSON value is a logged LLM call this ingester reads."""
    if not isinstance(record, dict):
        return False
    payload = payload_of(record)
    if payload is not record:
        return True
    if "messages" not in payload or "response" not in payload:
        return False
    return any(k in payload for k in PAYLOAD_KEYS + LOG_KEYS)


def looks_like_litellm(path: Path) -> bool:
    """A file of logged calls: its first record is one (files up to `SNIFF_BYTES` are parsed
    whole — a pretty-printed payload has no whole line — larger ones by their first lines)."""
    path = Path(path)
    if not path.is_file():
        return False
    if path.stat().st_size > SNIFF_BYTES:
        lines = sniff_lines(path, 2)
        if lines:
            return is_call_record(lines[0])
        head = sniff_text(path, SNIFF_BYTES).lstrip()  # a large pretty-printed payload
        return head.startswith(("{", "[")) and len(set(_PAYLOAD_HEAD.findall(head))) >= 2
    text = sniff_text(path, SNIFF_BYTES).strip()
    if not text.startswith(("{", "[")):
        return False
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        lines = sniff_lines(path, 2)
        return bool(lines) and is_call_record(lines[0])
    first = value[0] if isinstance(value, list) and value else value
    return is_call_record(first)


def _is_jsonl(path: Path) -> bool:
    """Whether the file's first non-blank line is a whole JSON object and another follows."""
    with path.open("rb") as fh:
        lines = (line for line in fh if line.strip())
        first, second = next(lines, b""), next(lines, None)
    try:
        return second is not None and isinstance(json.loads(first.decode("utf-8-sig")), dict)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return False


def _records(path: Path, parsed: Parsed) -> list[Record]:
    """The file's records with their numbers; JSONL lines that are not JSON are rejected."""
    if _is_jsonl(path):
        rejects: list[Reject] = []
        records: list[Record] = list(read_json_lines(path, rejects))
        parsed.rejects.extend(rejects)
        parsed.records = len(records) + len({r.line for r in rejects})
        return records
    value = load_json_document(path)
    items = value if isinstance(value, list) else [value]
    parsed.records = len(items)
    return list(enumerate(items, start=1))


def _tools(record: dict[str, Any], payload: dict[str, Any]) -> Any:
    for holder in (_obj(payload.get("model_parameters")), record, _obj(record.get("kwargs"))):
        if isinstance(holder.get("tools"), list) and holder["tools"]:
            return holder["tools"]
    return None


def _params(record: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    params = _obj(payload.get("model_parameters")) or _obj(record.get("kwargs"))
    return {k: v for k, v in params.items() if k not in ("tools", "extra_body", "metadata")}


def _failure(payload: dict[str, Any]) -> str | None:
    """The error of a failed call, or None."""
    if payload.get("status") == "failure" or payload.get("error_str"):
        info = _obj(payload.get("error_information"))
        error = payload.get("error_str") or info.get("error_message") or "no error text logged"
        kind = info.get("error_class") or info.get("error_code")
        return f"{kind}: {error}" if kind else str(error)
    return None


def _redacted(messages: Any, response: Any) -> bool:
    """Whether LiteLLM replaced the logged text (`turn_off_message_logging`)."""
    if response == REDACTED:
        return True
    sent = [m.get("content") for m in messages if isinstance(m, dict)]
    choices = _obj(response).get("choices")
    said = [_obj(_obj(c).get("message")).get("content") for c in choices or []]
    return REDACTED in sent or REDACTED in said


def _check(payload: dict[str, Any]) -> tuple[Category, str] | None:
    """(category, reason) when the call makes no trace, else None."""
    failure = _failure(payload)
    if failure is not None:
        return "dropped", f"failed call — {failure}"
    call_type = payload.get("call_type")
    if call_type not in CHAT_CALLS:
        return "unsupported", f"call_type {call_type!r} is not a chat completion"
    messages, response = payload.get("messages"), payload.get("response")
    if isinstance(messages, list) and _redacted(messages, response):
        return "dropped", "messages redacted by LiteLLM (turn_off_message_logging)"
    if isinstance(messages, str) or isinstance(response, str):
        return "unsupported", "a text prompt or text response, not chat messages"
    if not isinstance(messages, list) or not isinstance(response, dict):
        return "malformed", "expected a messages list and a response object"
    if not isinstance(response.get("choices"), list) or not response["choices"]:
        return "malformed", "response has no choices"
    return None


def _times(record: dict[str, Any], payload: dict[str, Any]) -> tuple[str | None, str | None]:
    if "startTime" in payload or "endTime" in payload:
        return iso_time(payload.get("startTime")), iso_time(payload.get("endTime"))
    end = record.get("timestamp")
    latency = record.get("latency_sec")
    if isinstance(end, int | float) and isinstance(latency, int | float):
        return iso_time(end - latency), iso_time(end)
    return iso_time(end), iso_time(end)


def _metadata(record: dict[str, Any], payload: dict[str, Any], choice: Any) -> dict[str, Any]:
    usage = _obj(_obj(payload.get("response")).get("usage"))
    blocks = _obj(_obj(choice).get("message")).get("thinking_blocks")
    redacted = sum(_obj(b).get("type") == "redacted_thinking" for b in blocks or [])
    cost = payload.get("response_cost", record.get("cost"))
    session = _obj(payload.get("metadata")).get("session_id") or payload.get("trace_id")
    meta: dict[str, Any] = {
        "session_id": session,  # the gateway's session (LiteLLM's trace id), when logged
        "call_id": payload.get("id"),
        "trace_id": payload.get("trace_id"),
        "cost_usd": cost if isinstance(cost, int | float) else None,
        "prompt_tokens": payload.get("prompt_tokens", usage.get("prompt_tokens")),
        "completion_tokens": payload.get("completion_tokens", usage.get("completion_tokens")),
        "model_group": payload.get("model_group") or None,
        "cache_hit": payload.get("cache_hit"),
        "finish_reason": _obj(choice).get("finish_reason"),
        "parameters": _params(record, payload) or None,
        "tools": _tools(record, payload),
        "skipped_blocks": {"encrypted reasoning": redacted} if redacted else None,
    }
    return {k: v for k, v in meta.items() if v is not None}


def _traces(
    path: Path, n: int, record: dict[str, Any], payload: dict[str, Any], keep: bool
) -> list[Trace]:
    response = payload["response"]
    prompt = to_messages(payload["messages"])
    choices = response["choices"]
    rid = str(payload.get("id") or response.get("id") or f"{path.stem}:{n}")
    started, ended = _times(record, payload)
    out = []
    for i, choice in enumerate(choices):
        reply: list[Message] = to_messages([_obj(choice).get("message")])
        if not keep:
            reply[0].reasoning = None
        out.append(
            Trace(
                source="litellm",
                source_id=rid if len(choices) == 1 else f"{rid}#{i}",
                source_file=str(path),
                source_lines=[n],
                messages=[*(m.model_copy() for m in prompt), *reply],
                model=response.get("model") or payload.get("model"),
                started_at=started,
                ended_at=ended,
                metadata=_metadata(record, payload, choice),
            )
        )
    return out


def read_calls(path: Path, *, keep_reasoning: bool) -> Parsed:
    """One log file → a trace per call (and choice), rejects with their record numbers."""
    parsed = Parsed()
    for n, record in _records(path, parsed):
        if not is_call_record(record):
            reason = "not a logged LLM call (no messages and response)"
            parsed.rejects.append(Reject(str(path), n, reason, "malformed", excerpt(record)))
            continue
        payload = payload_of(record)
        problem = _check(payload)
        if problem is not None:
            category, reason = problem
            parsed.rejects.append(Reject(str(path), n, reason, category, excerpt(payload)))
            continue
        try:
            parsed.traces.extend(_traces(path, n, record, payload, keep_reasoning))
        except (BadMessage, ValidationError) as err:
            reason = f"bad message — {err}"
            parsed.rejects.append(Reject(str(path), n, reason, "malformed", excerpt(payload)))
    return parsed


@document_ingester("litellm", detect=looks_like_litellm)
def litellm(**options: Any) -> DocumentConverter:
    """LiteLLM / gateway completion logs: one trace per logged call."""
    check_options("litellm", options, {"reasoning"})
    reasoning = options.get("reasoning", "keep")
    if reasoning not in ("keep", "drop"):
        raise InputError("ingester 'litellm': option reasoning must be 'keep' or 'drop'")

    def convert(source: Path) -> Parsed:
        source = Path(source)
        if source.is_dir():
            raise InputError(
                f"{source}: a folder; LiteLLM logs are read file by file — give its files "
                f"({source}/*.json), or use --format auto"
            )
        return read_calls(source, keep_reasoning=reasoning == "keep")

    return convert
