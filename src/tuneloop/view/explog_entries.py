"""EXPERIMENT-LOG.md read back as entries, for the dashboard (`gate.explog` writes the file).

Each entry the gate, the promotion and the round log append starts with its marker comment
(`<!-- tuneloop:verdict RUN -->`), then a `## heading` and `- ` bullet lines; a portfolio
round's entry has a table of its challengers too, kept as rows of cells. The file is
Markdown for people, not a record: it is split at the markers and kept as lines of text;
the page renders only `code` spans and **bold** from it, after escaping (page.inline_markdown),
so whatever a log line holds — a model's name, a reason quoting user input — shows as text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from tuneloop.errors import read_utf8

_MARKER = re.compile(r"^<!-- tuneloop:(.*) -->$")
_CELL = re.compile(r"(?<!\\)\|")
"""A cell border: a `|` not escaped as `\\|`."""
_RULE = re.compile(r"^\|(\s*:?-+:?\s*\|)+$")
"""A table's header rule, `|---|---|`."""


@dataclass(frozen=True)
class LogEntry:
    marker: str
    """The entry's marker (`verdict RUN`, `round r0001 TIME`, `promotion RUN`, …)."""
    heading: str
    """The `## ` line without its hashes ('' when the entry has none)."""
    bullets: list[str]
    """The `- ` lines without their dash."""
    text: list[str]
    """Any other non-empty lines."""
    table: list[list[str]] = field(default_factory=list)
    """The rows of a Markdown table in the entry (the first is its header; the `|---|` rule
    dropped), as cells of text; [] when it has none."""

    @property
    def kind(self) -> str:
        return self.marker.split(" ", 1)[0]


def read_entries(path: Path) -> list[LogEntry]:
    """The log's entries, oldest first; [] when there is no log yet."""
    if not Path(path).is_file():
        return []
    entries: list[LogEntry] = []
    marker: str | None = None
    lines: list[str] = []
    for line in read_utf8(path, "experiment log").splitlines():
        found = _MARKER.match(line.strip())
        if found:
            if marker is not None:
                entries.append(_entry(marker, lines))
            marker, lines = found.group(1), []
        elif marker is not None:
            lines.append(line)
    if marker is not None:
        entries.append(_entry(marker, lines))
    return entries


def _entry(marker: str, lines: list[str]) -> LogEntry:
    heading, bullets, text, table = "", [], [], []
    for line in (x.rstrip() for x in lines):
        if not line:
            continue
        if line.startswith("## ") and not heading:
            heading = line[3:].strip()
        elif line.startswith("- "):
            bullets.append(line[2:])
        elif line.lstrip().startswith("|") and line.endswith("|"):
            row = line.strip()
            if not _RULE.match(row):
                table.append([c.strip().replace("\\|", "|") for c in _CELL.split(row)[1:-1]])
        else:
            text.append(line)
    return LogEntry(marker, heading, bullets, text, table)
