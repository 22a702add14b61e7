"""`--format auto`: which ingester reads a file or a session folder, decided by looking.

    fmt = detect_format(Path("rollout-2025-08-01.jsonl"))   # "codex_cli", or None
    groups, unknown = sort_sources([Path("logs/")])         # {format: [sources]}, [paths]

Each registered ingester may carry a `detect(path) -> bool` (a registration property, like a
scorer's `inline`); the first that says yes, in `ORDER` (the most specific formats first, then
registration order), is the format. `generic_jsonl` is never chosen: it needs options naming
its fields. A folder is one session when a document ingester recognises it (a Cline task
folder, an OpenHands event folder); any other folder is walked and each file decided on its
own. Detection reads at most `SNIFF_BYTES` of a file: a 100 MB file of one line is decided from
its start, never loaded.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from tuneloop.registry import ingesters

ORDER = (
    "cline",
    "openhands",
    "gemini_cli",
    "aider",
    "codex_cli",
    "claude_code",
    "otel",
    "litellm",
    "openai_chat",
)
"""Built-in formats from the most specific shape to the most general (`openai_chat` reads any
`{"messages": …}` line, so it is asked last); plugins after them, by name."""
IGNORED = frozenset({".git", ".hg", ".svn", "__pycache__", ".DS_Store"})
SNIFF_BYTES = 1 << 20
SNIFF_LINES = 8
NEVER_AUTO = frozenset({"generic_jsonl"})


def sniff_lines(path: Path, n: int = SNIFF_LINES) -> list[dict[str, Any]]:
    """The JSON objects among the first `n` non-blank lines of a text file, reading at most
    `SNIFF_BYTES` (a line longer than that is not parsed)."""
    try:
        with Path(path).open("rb") as fh:
            head = fh.read(SNIFF_BYTES)
    except OSError:
        return []
    out: list[dict[str, Any]] = []
    for raw in head.split(b"\n")[:-1] if len(head) == SNIFF_BYTES else head.split(b"\n"):
        if len(out) >= n:
            break
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw.decode("utf-8-sig"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def sniff_text(path: Path, n: int = 4096) -> str:
    """The first `n` bytes of a file as text ("" when unreadable)."""
    try:
        with Path(path).open("rb") as fh:
            return fh.read(n).decode("utf-8-sig", errors="replace")
    except OSError:
        return ""


def detect_format(path: Path) -> str | None:
    """The registered ingester that recognises `path`, or None."""
    names = ingesters.names()
    ordered = [n for n in ORDER if n in names] + [n for n in names if n not in ORDER]
    for name in ordered:
        if name in NEVER_AUTO:
            continue
        detect = getattr(ingesters.get(name), "detect", None)
        try:
            if detect is not None and detect(Path(path)):
                return name
        except OSError:
            continue
    return None


def sort_sources(paths: Iterable[Path]) -> tuple[dict[str, list[Path]], list[Path]]:
    """({format: sources}, files no ingester recognises) for `--format auto`."""
    groups: dict[str, list[Path]] = {}
    unknown: list[Path] = []
    for source in _sources(paths):
        fmt = detect_format(source)
        if fmt is None:
            unknown.append(source)
        else:
            groups.setdefault(fmt, []).append(source)
    return groups, unknown


def _sources(paths: Iterable[Path]) -> Iterator[Path]:
    for path in paths:
        path = Path(path)
        if path.is_dir() and detect_format(path) is None:
            children = sorted(p for p in path.iterdir() if p.name not in IGNORED)
            yield from _sources(children)
        else:
            yield path
