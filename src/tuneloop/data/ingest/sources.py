"""Which ingester reads which input: the one place `tuneloop ingest` and `corpus build` decide it.

    plan = plan_sources([Path("logs/")], "auto")   # groups {fmt: [sources]}, unknown [files]
    traces, rejects, report = ingest_planned(plan, options)

With a named format: a JSONL ingester reads files, and a folder stands for its `*.jsonl`
(oldest first, `data/files.source_files`); a document ingester reads a file as it is, a folder
it recognises as one session, and any other folder as the files under it that it recognises
(the rest counted as skipped). With `auto`: each file or session folder by its shape
(`detect.py`); files of no known format are listed in `unknown` and counted in the report as
skipped, never silently dropped. No input, a path that does not exist, or a source given twice
is an `InputError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuneloop.data.files import source_files
from tuneloop.data.ingest.base import IngestReport, Reject
from tuneloop.data.ingest.detect import sort_sources
from tuneloop.data.ingest.documents import reads_documents
from tuneloop.errors import InputError
from tuneloop.records.trace import Trace
from tuneloop.registry import ingesters

AUTO = "auto"
UNKNOWN_KIND = "file of no known format"


@dataclass
class SourcePlan:
    groups: dict[str, list[Path]] = field(default_factory=dict)
    """Format → its sources, in input order."""
    unknown: list[Path] = field(default_factory=list)
    """Files `auto` found no format for."""

    @property
    def sources(self) -> list[Path]:
        return [s for group in self.groups.values() for s in group]

    @property
    def documents(self) -> bool:
        """Whether any group is read by a document ingester (its counts are records)."""
        return any(reads_documents(ingesters.get(fmt)) for fmt in self.groups)


def plan_sources(paths: Sequence[Path], fmt: str) -> SourcePlan:
    """The sources of an ingest of `paths` with format `fmt` (a name, or `auto`)."""
    for path in paths:
        if not Path(path).exists():
            raise InputError(f"{path}: not found")
    if fmt == AUTO:
        groups, unknown = sort_sources(paths)
        if not groups:
            shown = shown_paths(unknown) or ", ".join(map(str, paths))
            known = ", ".join(n for n in ingesters.names() if n != "generic_jsonl")
            raise InputError(
                f"{shown}: no file of a known format (known: {known}); give --format, or "
                "--format generic_jsonl with options naming your fields"
            )
        plan = SourcePlan(groups, unknown)
    else:
        plan = SourcePlan({fmt: []})
        for path in map(Path, paths):
            listed, unknown = _listed(path, fmt)
            plan.groups[fmt] += listed
            plan.unknown += unknown
        if not plan.groups[fmt]:
            what = "*.jsonl file" if not _documents(fmt) else f"file or session {fmt} reads"
            raise InputError(f"{', '.join(map(str, paths))}: no {what} in the folder")
    seen: list[Path] = []
    for source in plan.sources:
        if any(source.resolve() == s.resolve() for s in seen):
            raise InputError(f"{source}: given twice; its records would be written twice")
        seen.append(source)
    return plan


def _documents(fmt: str) -> bool:
    return reads_documents(ingesters.get(fmt))


def _listed(path: Path, fmt: str) -> tuple[list[Path], list[Path]]:
    """(sources, files it does not read) of one input under a named format: a file as it is;
    a folder as its `*.jsonl` (a JSONL format), as one session (a document format that
    recognises it), or as the files under it the document format recognises."""
    if not path.is_dir():
        return [path], []
    if not _documents(fmt):
        return source_files(path), []
    detect = getattr(ingesters.get(fmt), "detect", None)
    if detect is None or detect(path):
        return [path], []
    groups, unknown = sort_sources([path])
    others = [p for name, group in groups.items() if name != fmt for p in group]
    return groups.get(fmt, []), unknown + others


def ingest_planned(
    plan: SourcePlan, options: dict[str, Any] | None = None, *, source: str | None = None
) -> tuple[list[Trace], list[Reject], IngestReport]:
    """Every group of `plan` through its ingester; one report, unknown files counted."""
    from tuneloop.data.ingest import ingest_files

    traces: list[Trace] = []
    rejects: list[Reject] = []
    report = IngestReport()
    for fmt, group in plan.groups.items():
        got, bad, rep = ingest_files(fmt, group, options, source=source)
        traces += got
        rejects += bad
        report.add(rep)
    if plan.unknown:  # read (looked at) and skipped: the accounting still adds up
        report.skipped[UNKNOWN_KIND] += len(plan.unknown)
        report.lines_read += len(plan.unknown)
    return traces, rejects, report


def shown_paths(paths: Sequence[Path], n: int = 3) -> str:
    """At most `n` paths, and how many more."""
    more = f" and {len(paths) - n} more" if len(paths) > n else ""
    return ", ".join(map(str, paths[:n])) + more
