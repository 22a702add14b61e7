"""The traffic log's folder: file names, the folder lock, rotation names and the ids on disk."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

LOG_NAME = "traffic.jsonl"
ROTATED = re.compile(r"^traffic-(\d+)\.jsonl$")
REJECTS = Path("rejects") / "feedback.jsonl"
"""Refused feedback (unknown completion id), beside the log but out of the ingest glob."""


def now_iso() -> str:
    """UTC now as ISO 8601 with milliseconds and a Z."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def completion_id(response: Any) -> str | None:
    """The id of a chat.completion object, or of the first chunk of a streamed one."""
    first = response[0] if isinstance(response, list) and response else response
    cid = first.get("id") if isinstance(first, dict) else None
    return cid if isinstance(cid, str) and cid else None


def lock_folder(log_dir: Path) -> int:
    """Create `log_dir` and lock it for this process; the lock file's descriptor."""
    log_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(log_dir / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise OSError(errno.EBUSY, "another process is logging to this folder") from None
    return fd


def next_rotated(log_dir: Path) -> Path:
    """The name the live log is rotated to: `traffic-<n>.jsonl`, n one past the highest."""
    numbers = [int(m.group(1)) for m in map(ROTATED.match, os.listdir(log_dir)) if m]
    return log_dir / f"traffic-{max(numbers, default=0) + 1}.jsonl"


def ids_on_disk(log_dir: Path, index_size: int) -> list[str]:
    """The completion ids on disk, oldest first, at most the newest `index_size`."""
    newest_first: list[list[str]] = []
    total = 0
    for path in files_newest_first(log_dir):
        if total >= index_size:
            break
        newest_first.append(list(ids_in(path)))
        total += len(newest_first[-1])
    found = [cid for ids in reversed(newest_first) for cid in ids]
    return found[max(0, len(found) - index_size) :]


def files_newest_first(log_dir: Path) -> list[Path]:
    """The live log, then the rotated ones, newest first."""
    names = [m for m in map(ROTATED.match, os.listdir(log_dir)) if m]
    rotated = sorted(names, key=lambda m: int(m.group(1)), reverse=True)
    return [log_dir / LOG_NAME, *(log_dir / m.group(0) for m in rotated)]


def ids_in(path: Path) -> Iterator[str]:
    """The completion ids of the exchange lines of one log file (unreadable lines skipped)."""
    with contextlib.suppress(FileNotFoundError), path.open("rb") as fh:
        for raw in fh:
            try:
                obj = json.loads(raw)
            except ValueError:
                continue
            if isinstance(obj, dict) and "response" in obj:
                cid = completion_id(obj["response"])
                if cid is not None:
                    yield cid
