"""The replay's resumable call log, `calls.jsonl`: one `ReplayCall` appended per finished call.

A call is identified by (trace, step, teacher, request hash): a rerun reuses a row only for
the very request it answered, so changing a teacher's model or sampling, or the prefix, makes
new calls rather than mislabelled old ones, while the old rows stay in the log (paid for;
reused again if the config changes back). The last row of an identity wins, and a `missing`
row is asked again. A torn last line (the process killed mid-append) is cut before reading.
Every row is redacted (API keys by value, anything shaped like a credential) as it is
written: teachers repeat what they are shown and servers echo headers in error bodies.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from tuneloop.envkeys import Redactor
from tuneloop.records import append_jsonl, iter_jsonl, parse_record, repair_jsonl_tail
from tuneloop.records.replay import ReplayCall

CALLS_FILE = "calls.jsonl"

CallId = tuple[str, int, str, str]
"""(trace, step, teacher, request hash)."""


def call_id(row: ReplayCall) -> CallId:
    return (row.trace, row.step, row.teacher, row.request_hash)


def load_calls(path: Path) -> dict[CallId, ReplayCall]:
    """The last row of every call in a log being resumed (none when there is no log)."""
    if not path.exists():
        return {}
    repair_jsonl_tail(path)
    rows: dict[CallId, ReplayCall] = {}
    for lineno, obj in iter_jsonl(path):
        row = parse_record(obj, ReplayCall, f"{path}:{lineno}")
        rows[call_id(row)] = row
    return rows


class CallWriter:
    """Appends (and fsyncs) each finished call, one at a time, off the event loop."""

    def __init__(self, path: Path, redactor: Redactor) -> None:
        self.path = path
        self.redactor = redactor
        self._lock = asyncio.Lock()

    async def put(self, row: ReplayCall) -> None:
        stored = self.redactor.value(row.to_json())
        async with self._lock:
            await asyncio.to_thread(append_jsonl, self.path, [stored])
