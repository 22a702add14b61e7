"""The traffic log's file side: scrubbed, fsynced, size-rotated JSONL of exchanges and feedback.

`TrafficLog(DIR)` appends to `DIR/traffic.jsonl` one line per completion exchange,

    {"timestamp": ISO 8601, "request": {chat body}, "response": {chat.completion}}

(a streamed response is the list of its `chat.completion.chunk` objects; an answer from a
cascade adds its validated trace, `exchange.py`), and one line per
piece of feedback, `{"type": "feedback", "completion_id", "verdict"/"score"/"correction",
"timestamp"}` — the shape the `openai_chat` ingester reads and joins (`tuneloop ingest
--format openai_chat DIR/traffic.jsonl`, or a corpus source). HTTP is `middleware.py`; this module
knows nothing of it and is usable from any thread.

How it writes. Callers only enqueue; one writer thread scrubs each line with the corpus
scrubber (`tuneloop.scrub`, default rules: secrets, e-mails, IPs — a secret in a prompt never
reaches the disk), encodes it, and writes everything waiting as ONE `write` on an O_APPEND
descriptor followed by one fsync (group commit), so a line is never torn or interleaved. Past
`max_bytes` the file is renamed to `traffic-<n>.jsonl` (n = 1, 2, … oldest first) and a new one
started; rotation happens between lines. Feedback callers wait for their line's fsync;
exchanges do not (the response is already on its way), but their id enters the in-memory index
at once so that feedback sent right after a response is accepted.

A deleted log. When the folder or `traffic.jsonl` is deleted (or replaced) under a running
server, the writer notices before its next write — one `stat` of the path against the open
descriptor per group commit — and recreates the folder, its lock and a fresh `traffic.jsonl`,
warns in the server log and counts it (`recreated` in `/health`'s counts): lines written after
the deletion reach the disk instead of an unlinked file. What was in the deleted file is gone
with it; completion ids logged before stay known to feedback.

Failure. Any OSError (disk full, read-only or missing folder, permissions) stops logging for
good: `error` says what and where, `health()` reports it with the count of lines lost since,
feedback callers get `TrafficLogError`, and a partial write is truncated away. Deliberately no
retry: a log that silently resumed would hide the gap; restart once the disk is fixed.

Index. The completion ids feedback may name: those on disk at startup (newest files first)
and those logged since, at most `index_size`, oldest forgotten first. A lock file keeps a
second process from logging to the same folder.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import errno
import json
import logging
import os
import queue
import threading
from collections import Counter, OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tuneloop.records import fsync_dir
from tuneloop.scrub import Scrubber
from tuneloop.serve.traffic.exchange import exchange_line
from tuneloop.serve.traffic.files import (
    LOG_NAME,
    REJECTS,
    completion_id,
    ids_on_disk,
    lock_folder,
    next_rotated,
    now_iso,
)

__all__ = ["TrafficLog", "TrafficLogError"]

MAX_BATCH = 1024
_LOG = logging.getLogger("tuneloop.serve.traffic")
_WORDS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is exhausted",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.ENOTDIR: "a path component is a file, not a folder",
}
Future = concurrent.futures.Future


class TrafficLogError(Exception):
    """The log has stopped writing (see `TrafficLog.error`)."""


@dataclass
class _Item:
    kind: Literal["line", "reject", "barrier", "stop"]
    payload: dict[str, Any] | None = None
    done: Future[None] | None = None


class TrafficLog:
    """Append-only, scrubbed, rotated traffic log in one folder (see module docstring)."""

    def __init__(
        self,
        log_dir: Path,
        *,
        max_bytes: int = 256 << 20,
        index_size: int = 200_000,
        max_record_bytes: int = 8 << 20,
        scrubber: Scrubber | None = None,
    ) -> None:
        self.dir = Path(log_dir)
        self.path = self.dir / LOG_NAME
        self.max_bytes = max_bytes
        self.max_record_bytes = max_record_bytes
        """Exchanges whose request or response is larger than this are not logged (counted)."""
        self.index_size = index_size
        self.error: str | None = None
        self._scrubber = scrubber or Scrubber()
        self._index: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()  # the index and the counts
        self._scrub_lock = threading.Lock()  # the scrubber's counts (writer vs health())
        self._stats: Counter[str] = Counter()
        self._queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        self._fd: int | None = None
        self._lock_fd: int | None = None
        self._size = 0
        self._closed = False
        self._warned_trace = False
        try:
            self._lock_fd = lock_folder(self.dir)
            self._open()
            self._load_index()
        except OSError as err:
            self._fail(err, self.path)
        self._thread = threading.Thread(target=self._run, name="tuneloop-traffic", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    # ---- what callers use ----------------------------------------------------------------

    def record_exchange(self, request: dict[str, Any], response: Any) -> bool:
        """Queue one exchange; False (and counted as lost) when the log has stopped."""
        if self.error is not None or self._closed:
            self._count("lost")
            return False
        cid = completion_id(response)
        if cid is not None:
            self.remember(cid)
        line = exchange_line(request, response, now_iso())
        if "cascade" in line:
            self._count("cascade_traces")
        elif "cascade_error" in line:
            self._malformed_trace(line["cascade_error"])
        self._queue.put(_Item("line", line))
        return True

    def record_feedback(self, cid: str, fields: dict[str, Any]) -> Future[None]:
        """Queue a feedback line; the future completes once it is fsynced (or fails with
        `TrafficLogError`). The caller checks `knows(cid)` first."""
        done: Future[None] = Future()
        if self.error is not None or self._closed:
            self._count("lost")
            done.set_exception(TrafficLogError(self.error or "the traffic log is closed"))
            return done
        line = {"type": "feedback", "completion_id": cid, **fields, "timestamp": now_iso()}
        self._queue.put(_Item("line", line, done))
        return done

    def _malformed_trace(self, why: str) -> None:
        """Count a malformed cascade trace; warn about the first (an upstream that writes
        them writes them all: the count on /health says how many)."""
        self._count("cascade_malformed")
        if not self._warned_trace:
            self._warned_trace = True
            with self._scrub_lock:
                _LOG.warning(
                    "an upstream's cascade trace is malformed (%s); the exchange is logged "
                    "without it, and further ones are counted in /health's "
                    "traffic.counts.cascade_malformed",
                    self._scrubber.text(why),
                )

    def reject(self, reason: str, body: Any) -> None:
        """Record refused feedback in `rejects/feedback.jsonl` and the server log."""
        self._count("feedback_rejected")
        with self._scrub_lock:
            _LOG.warning("feedback refused: %s", self._scrubber.text(reason))
        if self.error is None and not self._closed:
            self._queue.put(
                _Item("reject", {"timestamp": now_iso(), "reason": reason, "body": body})
            )

    def remember(self, cid: str) -> None:
        """Let feedback name `cid` (the exchange line may still be on its way)."""
        with self._lock:
            self._index[cid] = None
            self._index.move_to_end(cid)
            while len(self._index) > self.index_size:
                self._index.popitem(last=False)

    def knows(self, cid: str) -> bool:
        """Whether feedback may name `cid` (`<id>#<choice>` names a choice of `<id>`)."""
        base, sep, index = cid.rpartition("#")
        with self._lock:
            return cid in self._index or bool(sep and index.isdigit() and base in self._index)

    def skip(self, why: str) -> None:
        """Count an exchange not logged on purpose (`why`: too_large, unparseable, …)."""
        self._count(f"skipped_{why}")

    def health(self) -> dict[str, Any]:
        """For /health: ok, the error if any, and the counts."""
        with self._lock:
            counts = dict(sorted(self._stats.items()))
            known = len(self._index)
        with self._scrub_lock:
            scrubbed = dict(sorted(self._scrubber.counts.items()))
        return {
            "ok": self.error is None,
            "error": self.error,
            "path": str(self.path),
            "counts": counts,
            "scrubbed": scrubbed,
            "known_completions": known,
            "queued": self._queue.qsize(),
        }

    def flush(self, timeout: float | None = 30.0) -> None:
        """Wait until everything queued so far is written (or has failed)."""
        if not self._thread.is_alive():
            return
        done: Future[None] = Future()
        self._queue.put(_Item("barrier", done=done))
        done.result(timeout)

    def close(self, timeout: float = 30.0) -> None:
        """Write what is queued, stop the writer, release the folder. Idempotent."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        self._queue.put(_Item("stop"))
        self._thread.join(timeout)
        for fd in (self._fd, self._lock_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._fd = self._lock_fd = None

    # ---- the writer thread ---------------------------------------------------------------

    def _run(self) -> None:
        while True:
            items = [self._queue.get()]
            with contextlib.suppress(queue.Empty):
                while len(items) < MAX_BATCH:
                    items.append(self._queue.get_nowait())
            try:
                self._commit([i for i in items if i.kind == "line"])
                self._write_rejects([i for i in items if i.kind == "reject"])
            except Exception as err:  # a bug must not kill the thread silently
                _LOG.exception("traffic log writer failed")
                self._fail(OSError(errno.EIO, f"{type(err).__name__}: {err}"), self.path)
            for item in items:
                if item.kind == "barrier" and item.done is not None:
                    item.done.set_result(None)
            if any(i.kind == "stop" for i in items):
                return

    def _commit(self, items: list[_Item]) -> None:
        """Write `items` as few writes as rotation allows; settle their futures."""
        segment, waiting = bytearray(), list[_Item]()
        pending = list(items)
        try:
            if pending and self.error is None:
                self._recreate_if_gone()
            while pending:
                if self.error is not None:
                    raise TrafficLogError(self.error)
                item = pending[0]
                data = self._encode(item.payload or {})
                filled = self._size + len(segment)
                if filled and filled + len(data) > self.max_bytes:
                    self._append(bytes(segment))
                    self._written(waiting)
                    segment, waiting = bytearray(), []
                    self._rotate()
                segment += data
                waiting.append(pending.pop(0))
            self._append(bytes(segment))
            self._written(waiting)
        except (OSError, TrafficLogError) as err:
            if isinstance(err, OSError):
                self._fail(err, self.path)
            lost = waiting + pending
            self._count("lost", len(lost))
            _settle(lost, TrafficLogError(self.error))

    def _written(self, items: list[_Item]) -> None:
        """Count the lines of a successful write and wake who waits for them."""
        if not items:
            return
        feedback = sum(1 for i in items if (i.payload or {}).get("type") == "feedback")
        with self._lock:
            self._stats["feedback"] += feedback
            self._stats["exchanges"] += len(items) - feedback
        _settle(items, None)

    def _encode(self, payload: dict[str, Any]) -> bytes:
        with self._scrub_lock:  # not the index lock: a long scrub must not stall the server
            clean = self._scrubber.value(payload)
        return (json.dumps(clean, ensure_ascii=False, separators=(",", ":")) + "\n").encode()

    def _append(self, data: bytes) -> None:
        """One write and one fsync; on failure cut the file back so no line is torn."""
        if not data:
            return
        if self._fd is None:
            raise TrafficLogError(self.error or "the traffic log is not open")
        try:
            written = os.write(self._fd, data)
            if written != len(data):
                raise OSError(errno.ENOSPC, "short write")
            os.fsync(self._fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._size)
            raise
        self._size += len(data)

    def _recreate_if_gone(self) -> None:
        """Reopen a fresh log when `traffic.jsonl` is no longer the file we hold open (see
        the module docstring): deleted with its folder, unlinked, or replaced."""
        if self._fd is None:
            return
        held = os.fstat(self._fd)
        try:
            now = os.stat(self.path)
        except FileNotFoundError:
            pass
        else:
            if (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
                return
        _LOG.warning("%s was deleted or replaced while logging; recreating it", self.path)
        os.close(self._fd)
        self._fd = None
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)
            self._lock_fd = None
        self._lock_fd = lock_folder(self.dir)
        self._open()
        fsync_dir(self.dir)
        self._count("recreated")

    def _rotate(self) -> None:
        assert self._fd is not None
        os.close(self._fd)
        self._fd = None
        os.rename(self.path, next_rotated(self.dir))
        fsync_dir(self.dir)
        self._open()
        self._count("rotations")

    def _write_rejects(self, items: list[_Item]) -> None:
        if not items or self.error is not None:
            return
        path = self.dir / REJECTS
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.exists() and path.stat().st_size > self.max_bytes:
                self._count("feedback_rejects_not_written", len(items))
                return
            data = b"".join(self._encode_reject(i.payload or {}) for i in items)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as err:
            self._fail(err, path)

    def _encode_reject(self, payload: dict[str, Any]) -> bytes:
        with self._scrub_lock:
            clean = self._scrubber.value(payload)
        return (json.dumps(clean, ensure_ascii=False) + "\n").encode()

    # ---- opening and failing -------------------------------------------------------------

    def _open(self) -> None:
        """Open traffic.jsonl for appending; end a torn last line (a crash mid-write) with a
        newline so that it stays one rejectable line instead of gluing onto the next."""
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        self._fd, self._size = fd, os.fstat(fd).st_size
        if self._size and os.pread(fd, 1, self._size - 1) != b"\n":
            self._append(b"\n")

    def _load_index(self) -> None:
        """Index the completion ids on disk, newest files first, up to `index_size`."""
        found = ids_on_disk(self.dir, self.index_size)
        with self._lock:
            self._index = OrderedDict.fromkeys(found)

    def _fail(self, err: OSError, path: Path) -> None:
        if self.error is not None:
            return
        what = _WORDS.get(err.errno or 0) or err.strerror or str(err)
        self.error = (
            f"{path}: cannot write the traffic log: {what}; logging has stopped (free space or "
            "fix the folder, then restart the server)"
        )
        _LOG.error(self.error)

    def _count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self._stats[key] += n


def _settle(items: list[_Item], error: Exception | None) -> None:
    for item in items:
        if item.done is not None and not item.done.done():
            if error is None:
                item.done.set_result(None)
            else:
                item.done.set_exception(error)
