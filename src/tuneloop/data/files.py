"""Writing a step's output files all together or not at all.

`tuneloop ingest` writes traces and rejects, `tuneloop corpus build` five files; a full disk
or a read-only folder half-way through must not leave some of them new and some old, or one
cut short. `write_files` writes every file to a temp file beside its target and fsyncs it,
and only when all are complete renames them into place; on any error the temp files are
removed and the error becomes an `InputError` (exit status 2) that names the path and says
what is wrong in words ("disk is full"), instead of an OSError traceback.

Before any of that, `ingest`, `corpus build` and `replay` refuse an output that is one of their
inputs (`tuneloop.errors.refuse_overwriting_inputs`).
"""

from __future__ import annotations

import errno
import json
import os
import re
import tempfile
from pathlib import Path

from tuneloop.errors import InputError
from tuneloop.records import fsync_dir

_WORDS = {
    errno.ENOSPC: "the disk is full (no space left on device)",
    errno.EDQUOT: "the disk quota is exhausted",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
}
_PATH_WORDS = {
    errno.EEXIST: "a folder on the path is a file",
    errno.ENOTDIR: "a folder on the path is a file",
    errno.EISDIR: "it is a folder, not a file",
}


def write_error(err: OSError, path: Path) -> InputError:
    """An OSError while writing `path`, as a one-line error a person can act on."""
    if err.errno in _PATH_WORDS:
        return InputError(
            f"{path}: cannot write: {_PATH_WORDS[err.errno]}; no output was written (give "
            "another output path)"
        )
    what = _WORDS.get(err.errno or 0) or err.strerror or type(err).__name__
    return InputError(
        f"{path}: cannot write: {what}; no output was written (free space or fix "
        "the folder's permissions, then rerun)"
    )


_ROTATED = re.compile(r"^(?P<stem>.+)-(?P<n>\d+)\.jsonl$")


def source_files(path: Path) -> list[Path]:
    """A source's files: the file itself, or a folder's `*.jsonl` oldest first — a rotated
    log's `NAME-1.jsonl`, `NAME-2.jsonl`, … (in number order), then the live `NAME.jsonl`
    (how `tuneloop proxy` and the embedded server rotate their traffic log)."""
    if path.is_file():
        return [path]

    def order(p: Path) -> tuple[str, int]:
        m = _ROTATED.match(p.name)
        return (m["stem"], int(m["n"])) if m else (p.stem, 1 << 62)

    return sorted(path.glob("*.jsonl"), key=order)


def write_files(files: dict[Path, bytes]) -> None:
    """Write every file in `files`, or — on any error — none of them (see module docstring)."""
    temps: list[tuple[Path, Path]] = []
    current = next(iter(files), Path("."))
    try:
        for path, data in files.items():
            current = Path(path)
            current.parent.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(
                prefix=f".{current.name}.", suffix=".tmp", dir=current.parent
            )
            temps.append((Path(name), current))
            _write_fd(fd, data)
        for temp, path in temps:
            current = path
            os.replace(temp, path)
    except OSError as err:
        _remove(temps)
        raise write_error(err, current) from None
    except BaseException:
        _remove(temps)
        raise
    for folder in {path.parent for _, path in temps}:
        fsync_dir(folder)


def _write_fd(fd: int, data: bytes) -> None:
    """Write all of `data` to `fd`, fsync and close it."""
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def _remove(temps: list[tuple[Path, Path]]) -> None:
    for tmp, _ in temps:
        tmp.unlink(missing_ok=True)


def jsonl_bytes(rows: list[dict[str, object]]) -> bytes:
    """Rows as JSONL (one JSON object per line, UTF-8), as `records.write_jsonl` writes them."""
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")


def json_bytes(obj: object) -> bytes:
    """One JSON document (indented, UTF-8), as `records.write_json` writes it."""
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
