"""The watcher's dealings with processes: its lock, signals, and the round process it runs.

- `WatchLock`: one watcher per ledger. An `fcntl.flock` on `<ledger>.watch.lock`, which the
  kernel releases when the holder dies, so a kill -9 never leaves the lock held. The holder's
  pid, host and start time are written inside to name it to a refused second watcher; a file
  that still names a holder when the lock is free was left by a dead watcher, and is taken
  over with a line saying so (a clean exit empties it).
- `Stopper`: SIGTERM/SIGINT handlers that remember the first signal, forward every one to the
  round process, and wake the watcher's sleep through a self-pipe (no CPU spent polling).
- `tie_to_watcher`: on Linux the round gets SIGTERM when the watcher dies without a word
  (`PR_SET_PDEATHSIG`), so it checkpoints instead of training on unwatched.
- `live_process`: is the round process a dead watcher left still running? (pid plus its
  creation time, so that a reused pid is not mistaken for it.)
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

from tuneloop.errors import InputError
from tuneloop.flywheel.status import iso


def lock_path(ledger: Path) -> Path:
    return ledger.with_name(ledger.name + ".watch.lock")


class WatchLock:
    """One watcher per ledger: an exclusive flock naming its holder (see the module docstring)."""

    def __init__(self, path: Path, started_at: float) -> None:
        self.path = Path(path)
        self.started_at = started_at
        self.took_over: dict[str, Any] | None = None
        """The dead holder named in the file when this lock was taken; None if it was clean."""
        self._fh: IO[str] | None = None

    def __enter__(self) -> WatchLock:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fh = self.path.open("a+", encoding="utf-8")
        except OSError as err:
            raise InputError(
                f"{self.path}: cannot create the watcher's lock ({err.strerror})"
            ) from None
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fh)
            fh.close()
            raise InputError(
                f"{self.path}: another watcher holds this ledger ({describe_holder(holder)}); "
                "stop it (SIGTERM) or wait for it"
            ) from None
        self.took_over = _holder(fh)
        me = {"pid": os.getpid(), "host": socket.gethostname(), "started_at": iso(self.started_at)}
        fh.seek(0)
        fh.truncate()
        fh.write(json.dumps(me) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
        self._fh = fh
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fh is not None:
            # a clean exit leaves the file empty: the next watcher has nothing to take over
            self._fh.seek(0)
            self._fh.truncate()
            self._fh.close()
            self._fh = None


def _holder(fh: IO[str]) -> dict[str, Any] | None:
    fh.seek(0)
    text = fh.read().strip()
    if not text:
        return None
    try:
        found = json.loads(text)
    except json.JSONDecodeError:
        return {"pid": text}
    return found if isinstance(found, dict) else {"pid": text}


def describe_holder(holder: dict[str, Any] | None) -> str:
    if holder is None:
        return "holder unknown"
    return (
        f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')}, "
        f"started {holder.get('started_at', '?')}"
    )


ATTEMPT_HEADER = "=== "
"""How the watcher starts each attempt's part of the round log (`Watcher._spawn_and_wait`)."""


def log_tail(log: Path) -> str:
    """The round's last words in its final attempt (its `error: …` line says why it refused
    or failed). The log is appended over attempts: what an earlier, interrupted attempt said
    (`received signal 15`) is not the reason of the attempt that ended the round."""
    try:
        with log.open("rb") as fh:
            fh.seek(max(0, log.stat().st_size - 4096))
            lines = fh.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    starts = [i for i, line in enumerate(lines) if line.startswith(ATTEMPT_HEADER)]
    if starts:
        lines = lines[starts[-1] + 1 :]
    errors = [line for line in lines if line.startswith("error:")]
    return (errors or [line for line in lines if line.strip()] or [""])[-1].strip()


class Stopper:
    """SIGTERM/SIGINT: remember the first, forward each to the running round, wake a sleep."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self._child: int | None = None
        self._pipe: tuple[int, int] | None = None

    @contextmanager
    def installed(self) -> Iterator[None]:
        """Handle the signals while inside (only the main thread can; elsewhere, no-op)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        self._pipe = os.pipe()
        os.set_blocking(self._pipe[1], False)
        old = {s: signal.signal(s, self._handle) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            yield
        finally:
            for s, handler in old.items():
                signal.signal(s, handler)
            for fd in self._pipe:
                os.close(fd)
            self._pipe = None

    @contextmanager
    def forwarding(self, pid: int) -> Iterator[None]:
        """Forward signals to `pid` while inside; one that came before is forwarded now."""
        self._child = pid
        try:
            if self.signal is not None:
                _kill(pid, self.signal)
            yield
        finally:
            self._child = None

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signal is None:
            self.signal = signum
        if self._child is not None:
            _kill(self._child, signum)
        if self._pipe is not None:
            with suppress(OSError):  # the pipe is full: a wake-up is already pending
                os.write(self._pipe[1], b"s")

    def sleep(self, seconds: float, *, wake_on_signal: bool = True) -> None:
        """Sleep, returning early at a signal (without CPU spent waiting: a self-pipe)."""
        if seconds <= 0 or (wake_on_signal and self.signal is not None):
            return
        if self._pipe is None:
            time.sleep(seconds)
            return
        ready, _, _ = select.select([self._pipe[0]], [], [], seconds)
        if ready:
            os.read(self._pipe[0], 512)


def _kill(pid: int, signum: int) -> None:
    with suppress(ProcessLookupError):
        os.kill(pid, signum)


def process_created(pid: int) -> float | None:
    import psutil

    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return None


def live_process(pid: int, created: float | None) -> Any:
    """The live process `pid` if it is the one created at `created`, else None."""
    import psutil

    try:
        proc = psutil.Process(pid)
        if created is not None and abs(proc.create_time() - created) > 0.01:
            return None  # the pid was reused
        return None if proc.status() == psutil.STATUS_ZOMBIE else proc
    except psutil.Error:
        return None


def tie_to_watcher(watcher_pid: int) -> Callable[[], None] | None:
    """A child-side hook: SIGTERM the round if the watcher dies (Linux `PR_SET_PDEATHSIG`)."""
    if not sys.platform.startswith("linux"):
        return None

    import ctypes

    # loaded here, in the watcher: the hook runs between fork and exec, where importing is unsafe
    libc = ctypes.CDLL(None, use_errno=True)

    def tie() -> None:
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        if os.getppid() != watcher_pid:  # the watcher died before prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return tie
