"""Ingesters that read whole documents: a JSON session file, a Markdown transcript, a session
folder (a Cline task folder, an OpenHands event folder) — not JSONL lines.

    @document_ingester("gemini_cli", detect=is_gemini_session)
    def gemini_cli(**options) -> DocumentConverter:
        def convert(source: Path) -> Parsed: ...
        return convert

A document converter gets one source (a file, or a folder that is one session) and returns a
`Parsed`: its traces, its rejects, the records it read but did not turn into messages counted
by kind (`skipped`: `ui-only`, `snapshot`, `duplicate event`, …), and how many records it read.
What a "record" is, and how records are numbered (1-based, in the order read; a trace's
`source_lines` are the numbers of the records merged into it, a reject's `line` the number of
the record it names), is each format's, stated in its module docstring.

Accounting, as for line ingesters (`base.py`): every record read is merged into a trace,
rejected with its file and position, or skipped under a named kind — records read = ingested +
rejected + skipped. `run_document` enforces it: records a converter left out of all three are
rejected as `unaccounted` (a plugin bug, never hidden). A source that cannot be read at all (a
truncated JSON file, a folder without its session files) is an `InputError` naming it; a source
larger than `MAX_DOCUMENT_BYTES` is refused before it is read.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from tuneloop.data.ingest.base import IngestReport, Reject, excerpt
from tuneloop.errors import InputError
from tuneloop.plugins import DocumentConverter, Ingester
from tuneloop.records.trace import Trace
from tuneloop.registry import ingesters

MAX_DOCUMENT_BYTES = 256 * 1024 * 1024
"""Largest single document read whole (JSON files are parsed in memory)."""

Detect = Callable[[Path], bool]


@dataclass
class Parsed:
    """What a document converter made of one source."""

    traces: list[Trace] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    """Records read and deliberately not turned into messages, by kind."""
    records: int = 0
    """Records read (the denominator of the accounting rule)."""

    def skip(self, kind: str, n: int = 1) -> None:
        self.skipped[kind] += n


def document_ingester(
    name: str, *, detect: Detect
) -> Callable[[Callable[..., DocumentConverter]], Callable[..., DocumentConverter]]:
    """Register a document ingester under `name`, with the test `--format auto` uses."""

    def deco(factory: Callable[..., DocumentConverter]) -> Callable[..., DocumentConverter]:
        factory.document = True  # type: ignore[attr-defined]
        factory.detect = detect  # type: ignore[attr-defined]
        ingesters.register(name)(cast(Ingester, factory))
        return factory

    return deco


def reads_documents(factory: Any) -> bool:
    """Whether a registered ingester reads whole documents (see the module docstring)."""
    return getattr(factory, "document", False) is True


def run_document(
    converter: DocumentConverter, source: Path
) -> tuple[list[Trace], list[Reject], IngestReport]:
    """Run one document converter over one source and account for every record."""
    source = Path(source)
    if not source.exists():
        raise InputError(f"{source}: not found")
    if source.is_file() and source.stat().st_size > MAX_DOCUMENT_BYTES:
        size = source.stat().st_size / 2**20
        raise InputError(
            f"{source}: {size:.0f} MiB, larger than the {MAX_DOCUMENT_BYTES // 2**20} MiB a "
            "session document may be; split it, or give its session files"
        )
    parsed = converter(source)
    merged = {n for t in parsed.traces for n in t.source_lines}
    rejected = {r.line for r in parsed.rejects} - merged
    rejects = [r for r in parsed.rejects if r.line in rejected]
    skipped = sum(parsed.skipped.values())
    missing = parsed.records - len(merged) - len(rejected) - skipped
    if missing != 0:  # fewer accounted for than read, or some counted twice: a plugin bug
        what = "not accounted for" if missing > 0 else "accounted for twice"
        reason = f"{abs(missing)} records {what} by the ingester (plugin bug)"
        rejects.append(Reject(str(source), 0, reason, "unaccounted"))
    report = IngestReport(
        lines_read=parsed.records,
        ingested=len(merged),
        rejected=len(rejected) + (1 if missing != 0 else 0),
        traces=len(parsed.traces),
        skipped=Counter(parsed.skipped),
    )
    report.reasons.update(f"{r.category}: {r.reason.split(' — ', 1)[0]}" for r in rejects)
    return parsed.traces, rejects, report


def load_json_document(path: Path) -> Any:
    """A JSON file's value; InputError naming the file and where it stops being JSON."""
    try:
        text = Path(path).read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InputError(f"{path}: not UTF-8 text (byte {err.start})") from None
    except OSError as err:
        raise InputError(f"{path}: cannot read: {err.strerror or err}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        ended = err.pos >= len(text.rstrip()) or err.msg.startswith("Unterminated string")
        what = "truncated (the file ends inside a value)" if ended else "invalid JSON"
        raise InputError(f"{path}:{err.lineno}:{err.colno}: {what}: {err.msg}") from None
    except RecursionError:
        raise InputError(f"{path}: nested too deep to be a session document") from None


def reject(source: Path | str, position: int, reason: str, record: Any = None) -> Reject:
    """A malformed record at `position` of `source`, with an excerpt of it."""
    return Reject(str(source), position, reason, "malformed", excerpt(record) if record else "")
