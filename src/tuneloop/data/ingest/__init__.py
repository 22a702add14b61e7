"""Trace ingesters. Importing this package registers the built-ins in
`tuneloop.registry.ingesters`: `openai_chat`, `claude_code`, `generic_jsonl` (JSONL, `base.py`),
and the document formats (whole files or session folders, `documents.py`); `detect.py` is
`--format auto`.

`ingest_files` runs one ingester over files and returns traces, rejects and the counts;
see `base.py` for the accounting rule (ingested + rejected = lines read), `feedback.py` for
how a source's feedback becomes a score.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from tuneloop.data.ingest import (  # noqa: F401  (importing registers them)
    aider,
    claude_code,
    cline,
    codex_cli,
    gemini_cli,
    generic_jsonl,
    litellm,
    openai_chat,
    openhands,
    otel,
)
from tuneloop.data.ingest.base import IngestReport, Reject, run_ingester
from tuneloop.data.ingest.detect import detect_format, sort_sources
from tuneloop.data.ingest.documents import reads_documents, run_document
from tuneloop.plugins import Converter, DocumentConverter
from tuneloop.records.trace import Trace
from tuneloop.registry import ingesters

__all__ = [
    "IngestReport",
    "Reject",
    "detect_format",
    "ingest_files",
    "reads_documents",
    "sort_sources",
]


def ingest_files(
    fmt: str, files: list[Path], options: dict[str, Any] | None = None, *, source: str | None = None
) -> tuple[list[Trace], list[Reject], IngestReport]:
    """Run the ingester `fmt` over `files` (a document ingester's sources may be session
    folders); `source` renames the traces' source."""
    factory = ingesters.get(fmt)
    converter = factory(**(options or {}))
    document = reads_documents(factory)
    traces: list[Trace] = []
    rejects: list[Reject] = []
    total = IngestReport()
    for path in files:
        if document:
            got, bad, rep = run_document(cast(DocumentConverter, converter), Path(path))
        else:
            got, bad, rep = run_ingester(cast(Converter, converter), Path(path))
        traces.extend(got)
        rejects.extend(bad)
        total.add(rep)
    if source is not None:
        for trace in traces:
            trace.source = source
    return traces, rejects, total
