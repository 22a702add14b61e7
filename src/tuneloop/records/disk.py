"""Atomic files, JSON and JSONL, and hashing: the file I/O every phase shares.

Writes are atomic (temp file in the same folder, fsync, rename) so a crash never leaves a
half-written artifact; JSONL logs are appended line by line and fsynced so that a crash loses
at most the line being written, and readers name the file and line of anything they cannot
parse. `read_json` is the untyped reader under `read_record`; outside this package it is for
files that are not tuneloop artifacts (tests/test_raw_reads.py holds the list).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from tuneloop.errors import InputError

# ---- atomic files ---------------------------------------------------------------------


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers see the old file or the new one, never half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False, ensure_ascii=False) + "\n")


def read_json(path: Path) -> dict[str, Any]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"{path}:{err.lineno}: invalid JSON: {err.msg}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object at the top level")
    return data


def fsync_dir(folder: Path) -> None:
    """fsync a folder so that a rename inside it survives a crash (best effort)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ---- JSONL ------------------------------------------------------------------------------


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) for each non-blank line; errors name file and line.

    A final line without a newline that does not parse is reported like any other bad line:
    callers that resume an append-only log use `repair_jsonl_tail` first.
    """
    path = Path(path)
    try:
        fh = path.open(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    with fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise InputError(f"{path}:{lineno}: invalid JSON: {err.msg}") from None
            if not isinstance(obj, dict):
                raise InputError(f"{path}:{lineno}: expected a JSON object")
            yield lineno, obj


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [obj for _, obj in iter_jsonl(path)]


_JSONL = json.JSONEncoder(ensure_ascii=False)
"""`json.dumps(row, ensure_ascii=False)` without building an encoder per row (hot in evaluate)."""


def jsonl_line(row: dict[str, Any]) -> str:
    """One row as a JSONL line (without its newline), as `append_jsonl` writes it."""
    return _JSONL.encode(row)


def append_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    """Append rows and fsync, so that a finished row survives a crash."""
    append_lines(path, [jsonl_line(r) for r in rows])


def append_lines(path: Path, lines: Sequence[str]) -> None:
    """`append_jsonl` for rows already serialized (`jsonl_line`), one per line."""
    if not lines:
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    write_lines(path, [jsonl_line(r) for r in rows])


def write_lines(path: Path, lines: Sequence[str]) -> None:
    """Replace `path` atomically with these serialized rows (`jsonl_line`), one per line."""
    atomic_write_text(path, "".join(line + "\n" for line in lines))


def repair_jsonl_tail(path: Path) -> int:
    """Drop a torn last line (written by a process killed mid-append). Returns bytes cut."""
    path = Path(path)
    if not path.exists():
        return 0
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return 0
    keep = data.rfind(b"\n") + 1
    with path.open("r+b") as fh:
        fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())
    return len(data) - keep


# ---- hashing ------------------------------------------------------------------------------


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def sha256_tree(folder: Path) -> str:
    """Hash of a folder: sorted relative paths with each file's sha256 (names and contents)."""
    folder = Path(folder)
    h = hashlib.sha256()
    for p in sorted(q for q in folder.rglob("*") if q.is_file()):
        rel = p.relative_to(folder).as_posix()
        h.update(rel.encode() + b"\0" + sha256_file(p).encode() + b"\n")
    return h.hexdigest()


def sha256_path(path: Path) -> str:
    """sha256 of a file, or of a folder's tree."""
    path = Path(path)
    return sha256_tree(path) if path.is_dir() else sha256_file(path)


def canonical_json(obj: Any) -> str:
    """Stable JSON text for hashing: sorted keys, no spaces, UTF-8."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
