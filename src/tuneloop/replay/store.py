"""The replay's resumable call log, `calls.jsonl`: one `ReplayCall` appended per finished call.

A call is identified by (trace, step, teacher, request hash): a rerun reuses a row only for
the very request it answered, so changing a teacher's model or sampling, or the prefix, makes
new calls rather than mislabelled old ones, while the old rows stay in the log (paid for;
reused again if the config changes back). The last row of an identity wins, and a `missing`
row is asked again. A torn last line (the process killed mid-append) is cut before reading.
Every row is redacted (API keys by value, anything shaped like a credential) as it is
written: teachers repeat what they are shown and servers echo headers in error bodies.

`carry_over` finds, in earlier logs (the loop passes the call logs of replay folders it
quarantined when the phase was redone: a changed suite or replay setting, a new code version,
`--from replay`), the finished calls whose identity is unchanged: they were already paid for,
so the replay re-scores them under its current settings and appends them to the new log —
counted as reused, not as paid this run — instead of asking again. Missing rows are not
carried: they are asked again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
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


def carry_over(
    logged: dict[CallId, ReplayCall], wanted: Iterable[CallId], earlier: Sequence[Path]
) -> tuple[list[ReplayCall], dict[str, int]]:
    """The wanted calls `logged` lacks (or has only as missing) that an earlier log answered
    (the first log in `earlier` that has one wins), and log path → calls taken from it.

    Pure reading: the caller re-scores the rows under its own settings (the answer is what
    was paid for; scoring is free) and appends them to its log."""
    need = {c for c in wanted if c not in logged or logged[c].status == "missing"}
    rows: list[ReplayCall] = []
    taken: dict[str, int] = {}
    for old in earlier:
        found = [r for c, r in load_calls(Path(old)).items() if c in need and r.status != "missing"]
        if found:
            rows += found
            need -= {call_id(r) for r in found}
            taken[str(old)] = len(found)
    return rows, taken
