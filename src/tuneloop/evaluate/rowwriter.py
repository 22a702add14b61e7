"""The sample log's group commit: one writer task appends (and fsyncs) everything that
finished while the previous append was in flight, so a fast server is not throttled to the
disk's fsync rate, and a crash loses only rows that finished in the last few ms.

Deliberately, a worker hands over a finished sample's fields, not its `SampleRow`: the writer
validates, redacts and serializes each batch in one go on the event loop, after the workers
woken in the same turn have sent their next requests; the writer thread only writes text.
The same Python work done inside each worker, between its response and its next request, cost
~20-35 µs more CPU a sample against an instant server (issue 35's profile of
benchmarks/eval_client.py's path): interleaved with the socket callbacks it runs cold.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tuneloop.records import append_lines
from tuneloop.samplelog import SampleRow

RowFields = dict[str, Any]
"""A finished sample as `SampleRow`'s keyword arguments, before the writer validates it."""


class RowWriter:
    """Group commit: validate, record and append (and fsync) whatever finished since the last
    append. `line` is a row's (redacted) line in the log; `record` sees every row built."""

    def __init__(
        self, path: Path, line: Callable[[SampleRow], str], record: Callable[[SampleRow], None]
    ) -> None:
        self.path = path
        self.line = line
        self.record = record
        self.pending: list[RowFields] = []
        self.written = 0
        self._wake = asyncio.Event()
        self._closing = False
        self._task = asyncio.ensure_future(self._loop())

    def put(self, fields: RowFields) -> None:
        if self._task.done():
            self._task.result()  # the writer failed (a full disk): stop the eval now, not at close
        self.pending.append(fields)
        self._wake.set()

    async def _loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch, self.pending = self.pending, []
            if batch:
                lines = []
                for fields in batch:
                    row = SampleRow(**fields)
                    self.record(row)
                    lines.append(self.line(row))
                await asyncio.to_thread(append_lines, self.path, lines)
                self.written += len(batch)
            if self._closing and not self.pending:
                return

    async def close(self) -> None:
        self._closing = True
        self._wake.set()
        await self._task
