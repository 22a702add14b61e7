"""Where the mirror's pairs go: `<log-dir>/shadow/pairs.jsonl` (scrubbed) and `state.json`.

    log = PairLog(Path("traffic/shadow"), snapshot=mirror.state)
    ok = await log.write(pair)        # scrubbed, appended, fsynced, on the writer thread
    log.close()                       # the last state.json, then the thread stops

Used by `mirror.py`; read back by `tuneloop shadow report` (`tuneloop.shadow`) as
`records.shadow.ShadowPair` lines. One writer thread does every write, so lines never
interleave and the event loop never waits on the disk; the mirror's in-flight bound is also
the bound on pairs waiting here. Each pair is scrubbed with the traffic log's scrubber
(`tuneloop.scrub`, default rules: secrets, e-mails, IPs) before it is encoded.

Deliberately simpler than the traffic log (`serve/traffic/log.py`): no rotation, no group
commit and no id index — a sampled, bounded stream of diagnostic pairs needs none of them.
A write that fails (disk full, folder removed) stops the pair log for good, as the traffic
log does: `error` says why, later pairs are counted `lost`, and the proxy keeps serving.
`state.json` is rewritten atomically (`records.write_record`) at most every `state_every_s`
seconds while pairs arrive, and at `close`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tuneloop.records import append_lines, jsonl_line, write_record
from tuneloop.records.shadow import PAIRS_FILE, STATE_FILE, ShadowPair, ShadowState
from tuneloop.scrub import Scrubber

_LOG = logging.getLogger("tuneloop.serve.proxy")


class PairLog:
    """Scrubbed pairs appended to `folder/pairs.jsonl`; the mirror's state in `state.json`."""

    def __init__(
        self,
        folder: Path,
        snapshot: Callable[[], ShadowState],
        *,
        scrubber: Scrubber | None = None,
        state_every_s: float = 5.0,
    ) -> None:
        self.folder = Path(folder)
        self.pairs = self.folder / PAIRS_FILE
        self.state = self.folder / STATE_FILE
        self.error: str | None = None
        self._snapshot = snapshot
        self._scrubber = scrubber or Scrubber()
        self._every = state_every_s
        self._last_state = 0.0
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="tuneloop-shadow")
        self._closed = False
        self._close_lock = threading.Lock()
        self.folder.mkdir(parents=True, exist_ok=True)

    async def write(self, pair: ShadowPair) -> bool:
        """Append `pair` on the writer thread; False when it could not be written."""
        if self.error is not None or self._closed:
            return False
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self._append, pair)

    def _append(self, pair: ShadowPair) -> bool:
        if self.error is not None:
            return False
        try:
            line = jsonl_line(self._scrubber.value(pair.to_json()))
            append_lines(self.pairs, [line])
        except OSError as err:
            self.error = f"{self.pairs}: {err.strerror or err}"
            _LOG.error("shadow pairs are no longer written: %s", self.error)
            return False
        if time.monotonic() - self._last_state >= self._every:
            self._write_state()
        return True

    def _write_state(self) -> None:
        self._last_state = time.monotonic()
        try:
            write_record(self.state, self._snapshot())
        except OSError as err:
            _LOG.warning("shadow state not written: %s: %s", self.state, err.strerror or err)

    def close(self) -> None:
        """Finish the writes queued, write the last state, stop the thread (once)."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self._pool.shutdown(wait=True)
        self._write_state()
