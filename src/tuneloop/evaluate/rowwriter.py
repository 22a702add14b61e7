"""The sample log's group commit: one writer task appends (and fsyncs) everything that
finished while the previous append was in flight, so a fast server is not throttled to the
disk's fsync rate, and a crash loses only rows that finished in the last few ms."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tuneloop.records import append_jsonl
from tuneloop.samplelog import SampleRow


class RowWriter:
    """Group commit: append (and fsync) whatever has finished since the last append."""

    def __init__(self, path: Path, stored: Callable[[SampleRow], dict[str, Any]]) -> None:
        self.path = path
        self.stored = stored
        self.pending: list[dict[str, Any]] = []
        self.written = 0
        self._wake = asyncio.Event()
        self._closing = False
        self._task = asyncio.ensure_future(self._loop())

    def put(self, row: SampleRow) -> None:
        self.pending.append(self.stored(row))
        self._wake.set()

    async def _loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch, self.pending = self.pending, []
            if batch:
                await asyncio.to_thread(append_jsonl, self.path, batch)
                self.written += len(batch)
            if self._closing and not self.pending:
                return

    async def close(self) -> None:
        self._closing = True
        self._wake.set()
        await self._task
