"""An exclusive, non-blocking flock on an open file that names its holder by pid.

Used for the one-holder rules of a workdir (`loop/state.py`) and of a managed champion service
(`flywheel/service/adoption.py`). The lock lives as long as the file stays open; closing it
(or the process dying) releases it, so a stale pid in the file never blocks anyone.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from typing import IO

from tuneloop.errors import InputError


def hold_pid_lock(fh: IO[str], refusal: Callable[[str], str]) -> None:
    """Lock `fh` (opened "a+") and write this process's pid into it; if another process holds
    it, close `fh` and raise InputError(refusal(holder pid as written, or "unknown"))."""
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.seek(0)
        holder = fh.read().strip() or "unknown"
        fh.close()
        raise InputError(refusal(holder)) from None
    fh.seek(0)
    fh.truncate()
    fh.write(f"{os.getpid()}\n")
    fh.flush()
