"""Trace ingesters. Importing this package registers the built-ins in
`tuneloop.registry.ingesters`: `openai_chat`, `claude_code`, `generic_jsonl`.

`ingest_files` runs one ingester over files and returns traces, rejects and the counts;
see `base.py` for the accounting rule (ingested + rejected = lines read), `feedback.py` for
how a source's feedback becomes a score.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuneloop.data.ingest import claude_code, generic_jsonl, openai_chat  # noqa: F401  (registers)
from tuneloop.data.ingest.base import IngestReport, Reject, run_ingester
from tuneloop.records.trace import Trace
from tuneloop.registry import ingesters

__all__ = ["IngestReport", "Reject", "ingest_files"]


def ingest_files(
    fmt: str, files: list[Path], options: dict[str, Any] | None = None, *, source: str | None = None
) -> tuple[list[Trace], list[Reject], IngestReport]:
    """Run the ingester `fmt` over `files`; `source` renames the traces' source."""
    converter = ingesters.get(fmt)(**(options or {}))
    traces: list[Trace] = []
    rejects: list[Reject] = []
    total = IngestReport()
    for path in files:
        got, bad, rep = run_ingester(converter, Path(path))
        traces.extend(got)
        rejects.extend(bad)
        total.add(rep)
    if source is not None:
        for trace in traces:
            trace.source = source
    return traces, rejects, total
