"""One exchange line of the traffic log, and the cascade trace it carries when a cascade answered.

    line = exchange_line(request, response, timestamp)

A plain exchange is written as it always was, `{"timestamp", "request", "response"}` (version
1 of the line, which names no schema). When the response carries a cascade's trace
(`tuneloop.tiers`: the body's `tuneloop_cascade`, or for a stream the chunk that carries it —
the cascade server puts it on the last content chunk), the line is version 2:

    {"schema": "tuneloop.traffic/2", "timestamp", "request", "response",
     "cascade": {"tier", "cost_usd", "route", "steps": [{"name", "confidence", "raw",
                 "kept", "latency_s", "completion_tokens", "cost_usd", …}]}}

`cascade` is the trace as `CascadeTrace` validated it (nulls left out), so a reader reads it
with `CascadeTrace.model_validate` and never re-checks what an upstream wrote. A trace that
does not validate (the upstream is not ours to trust) is no error of the user's request: the
line is written without it and with `"cascade_error": "<field>: <why>"` instead. Either way
the field is moved out of the logged response, not copied — one copy of each fact on disk,
and none of an unvalidated one; the bytes the client got are untouched (the middleware logs a
parsed copy). Readers that predate version 2 ignore both fields and read the exchange as before.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from tuneloop.tiers import CASCADE_FIELD, CascadeTrace, read_trace

__all__ = ["SCHEMA", "FoundTrace", "exchange_line", "take_trace"]

SCHEMA = "tuneloop.traffic/2"
"""The schema of an exchange line with a cascade trace (or a malformed one)."""
MAX_ERROR_CHARS = 300
"""A malformed trace's message is cut here: its field path comes from untrusted keys."""


class FoundTrace(NamedTuple):
    """A response with its cascade trace taken out."""

    response: Any
    """The response (or its chunk list) without `tuneloop_cascade`."""
    trace: CascadeTrace | None
    """The trace; None when there was none or it was malformed."""
    error: str | None
    """Why a trace present did not validate; None otherwise."""


def take_trace(response: Any) -> FoundTrace:
    """The cascade trace of a response or a stream's chunks, moved out of it (module
    docstring). Never raises: whatever the upstream wrote, the exchange is still logged."""
    chunks = response if isinstance(response, list) else [response]
    carriers = [
        i for i, c in enumerate(chunks) if isinstance(c, dict) and c.get(CASCADE_FIELD) is not None
    ]
    if not carriers:
        return FoundTrace(response, None, None)
    stripped = [
        {k: v for k, v in c.items() if k != CASCADE_FIELD} if i in carriers else c
        for i, c in enumerate(chunks)
    ]
    out = stripped if isinstance(response, list) else stripped[0]
    try:
        trace = read_trace(chunks[carriers[-1]])
    except ValueError as err:
        return FoundTrace(out, None, _short(str(err)))
    except Exception as err:  # untrusted input must never fail the request it came with
        return FoundTrace(out, None, _short(f"{CASCADE_FIELD}: unreadable ({type(err).__name__})"))
    if trace is not None and trace.tier not in {s.name for s in trace.steps}:
        why = f"{CASCADE_FIELD}.tier: {trace.tier!r} is not among the tiers asked (steps)"
        return FoundTrace(out, None, _short(why))
    return FoundTrace(out, trace, None)


def exchange_line(request: dict[str, Any], response: Any, timestamp: str) -> dict[str, Any]:
    """The log line of one exchange: version 1 without a cascade trace, else version 2."""
    found = take_trace(response)
    if found.trace is None and found.error is None:
        return {"timestamp": timestamp, "request": request, "response": response}
    line: dict[str, Any] = {"schema": SCHEMA, "timestamp": timestamp, "request": request}
    line["response"] = found.response
    if found.trace is not None:
        line["cascade"] = found.trace.model_dump(mode="json", exclude_none=True)
    else:
        line["cascade_error"] = found.error
    return line


def _short(text: str) -> str:
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"
