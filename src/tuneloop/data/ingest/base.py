"""What every ingester shares: the plugin protocol, line reading, and the accounting rule.

An ingester is a factory registered in `tuneloop.registry.ingesters`; called with its options
it returns a converter `(file, lines) -> iterable of Trace | Reject | Joined`, where `lines`
are the file's parsed JSON objects with their 1-based line numbers. One converter is called
for every file of one ingest in order, so it may carry state from file to file (the
`openai_chat` ingester joins feedback to an exchange of an earlier file).

Accounting (the "nothing silently lost" rule). Lines read = the file's non-blank lines
(whitespace-only lines are counted apart as `blank` and are not input). Every line read ends in
exactly one of two places:
- ingested: its number is in `source_lines` of at least one written trace (a line merged into
  a multi-line trace — a Claude Code session — counts once, as ingested), or the converter
  yielded it as `Joined` (merged into a trace of an earlier file);
- rejected: it is in the rejects file with its file, line number, category and reason.
  Categories: `malformed` (not JSON, not an object, or missing what the format needs),
  `unsupported` (a record type the format does not turn into conversation turns), `dropped`
  (valid, but excluded by a documented policy such as an abandoned branch).
`run_ingester` enforces the rule for any plugin: a line a converter neither merged nor rejected
is rejected as `unaccounted` (a plugin bug, reported, never hidden), so ingested + rejected =
lines read always holds.

Lines are read as bytes and decoded one by one: a line that is not UTF-8 is a `malformed`
reject naming the byte (never text with replacement characters slipped into a training row); a
UTF-8 byte-order mark at the start of a file is ignored; CRLF line ends are read as LF.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from tuneloop.errors import InputError
from tuneloop.records.trace import Trace

Category = Literal["malformed", "unsupported", "dropped", "unaccounted"]
EXCERPT_CHARS = 200
MAX_DEPTH = 200
"""Deepest JSON nesting of a line accepted (objects and lists); deeper lines are rejected."""


@dataclass(frozen=True)
class Reject:
    """One input line that did not become (part of) a trace."""

    file: str
    line: int
    reason: str
    category: Category = "malformed"
    excerpt: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "category": self.category,
            "reason": self.reason,
            "excerpt": self.excerpt,
        }


@dataclass(frozen=True)
class Joined:
    """A line merged into a trace of an earlier file (feedback for an exchange logged before
    a rotation): ingested, though no trace of its own file names it."""

    line: int


Lines = Iterable[tuple[int, dict[str, Any]]]


class Converter(Protocol):
    def __call__(self, file: str, lines: Lines) -> Iterable[Trace | Reject | Joined]: ...


IngesterFactory = Callable[..., Converter]


def line_ingester(
    name: str, *, detect: Callable[[Path], bool] | None = None
) -> Callable[[IngesterFactory], IngesterFactory]:
    """Register a JSONL ingester under `name`, with the test `--format auto` uses (`detect`,
    given the file's path; None: never chosen by `auto`)."""
    from tuneloop.registry import ingesters

    def deco(factory: IngesterFactory) -> IngesterFactory:
        factory.detect = detect  # type: ignore[attr-defined]
        ingesters.register(name)(factory)
        return factory

    return deco


@dataclass
class IngestReport:
    """Counts of one ingest run (one or more files)."""

    lines_read: int = 0
    blank: int = 0
    ingested: int = 0
    rejected: int = 0
    traces: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    """Records read and deliberately not turned into messages, by kind (document formats:
    `documents.py`); `lines_read` counts them too."""

    def add(self, other: IngestReport) -> None:
        self.lines_read += other.lines_read
        self.blank += other.blank
        self.ingested += other.ingested
        self.rejected += other.rejected
        self.traces += other.traces
        self.reasons.update(other.reasons)
        self.skipped.update(other.skipped)

    def to_json(self) -> dict[str, Any]:
        return {
            "lines_read": self.lines_read,
            "blank": self.blank,
            "ingested": self.ingested,
            "rejected": self.rejected,
            "traces": self.traces,
            "reject_reasons": dict(sorted(self.reasons.items())),
            **({"skipped": dict(sorted(self.skipped.items()))} if self.skipped else {}),
        }


def check_options(name: str, options: dict[str, Any], allowed: Iterable[str]) -> None:
    """Refuse unknown ingester options by name."""
    allowed = set(allowed)
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise InputError(
            f"ingester {name!r}: unknown option(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(allowed)) or 'none'}"
        )


def read_json_lines(path: Path, rejects: list[Reject]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line, object) for each line that parses to a JSON object; reject the others.

    Blank lines are skipped and not yielded; the caller counts them from `path` separately.
    A line that is not UTF-8 is rejected by itself (see the module docstring).
    """
    file = str(path)
    for lineno, line in _text_lines(path):
        if isinstance(line, UnicodeDecodeError):
            bad = line.object[line.start : line.start + 1].hex()
            reason = f"not UTF-8 text (byte 0x{bad} at column {line.start + 1})"
            rejects.append(Reject(file, lineno, reason))
            continue
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            too_deep = _deeper_than(obj, MAX_DEPTH, line)
        except json.JSONDecodeError as err:
            rejects.append(Reject(file, lineno, f"invalid JSON: {err.msg}", excerpt=cut(line)))
            continue
        except RecursionError:
            too_deep = True
        if too_deep:
            # Rejected, not fatal: like a line that is not JSON, one absurd line must not
            # stop an ingest of a million good ones, and the rejects file names it. Lines
            # this deep are not conversations (a log writer looping on itself), and every
            # later step (scrub, validation, writing) walks values recursively.
            reason = f"nested deeper than {MAX_DEPTH} levels (not a conversation record)"
            rejects.append(Reject(file, lineno, reason, excerpt=cut(line)))
            continue
        if not isinstance(obj, dict):
            got = type(obj).__name__
            hint = " (a JSON array: write one object per line, JSONL)" if got == "list" else ""
            reason = f"expected a JSON object, got {got}{hint}"
            rejects.append(Reject(file, lineno, reason, excerpt=cut(line)))
            continue
        yield lineno, obj


def _text_lines(path: Path) -> Iterator[tuple[int, str | UnicodeDecodeError]]:
    """(line number, text or the decoding error) of each line of a file read as bytes."""
    with Path(path).open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                yield lineno, raw.decode("utf-8")
            except UnicodeDecodeError as err:
                yield lineno, err


def _deeper_than(obj: Any, limit: int, line: str) -> bool:
    """Whether `obj` nests lists/objects more than `limit` deep (iterative: no recursion)."""
    if not isinstance(obj, (dict, list)) or line.count("{") + line.count("[") <= limit:
        return False  # the common case, decided at C speed
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > limit:
            return True
        children = value.values() if isinstance(value, dict) else value
        stack.extend((v, depth + 1) for v in children if isinstance(v, (dict, list)))
    return False


def line_census(path: Path) -> tuple[set[int], int]:
    """(numbers of the non-blank lines, count of blank lines) of a text file; a line that is
    not UTF-8 is not blank (it is read, and rejected)."""
    nonblank: set[int] = set()
    blank = 0
    for lineno, line in _text_lines(path):
        if isinstance(line, UnicodeDecodeError) or line.strip():
            nonblank.add(lineno)
        else:
            blank += 1
    return nonblank, blank


def run_ingester(
    converter: Converter, path: Path
) -> tuple[list[Trace], list[Reject], IngestReport]:
    """Run one converter over one file and account for every non-blank line."""
    if Path(path).is_dir():
        raise InputError(f"{path}: is a folder; give its files (e.g. {path}/*.jsonl)")
    if not Path(path).is_file():
        raise InputError(f"{path}: file not found")
    rejects: list[Reject] = []
    traces: list[Trace] = []
    joined: set[int] = set()
    for out in converter(str(path), read_json_lines(path, rejects)):
        if isinstance(out, Trace):
            traces.append(out)
        elif isinstance(out, Joined):
            joined.add(out.line)
        else:
            rejects.append(out)
    nonblank, blank = line_census(path)
    ingested = {n for t in traces for n in t.source_lines} | joined
    rejected_lines = {r.line for r in rejects}
    overlap = ingested & rejected_lines
    # A line both merged and rejected counts as ingested; drop the reject so it is not
    # counted twice (a converter may reject a duplicate block but keep the line's turn).
    rejects = [r for r in rejects if r.line not in overlap]
    accounted = ingested | rejected_lines
    missing = nonblank - accounted
    rejects.extend(
        Reject(str(path), n, "line not accounted for by the ingester (plugin bug)", "unaccounted")
        for n in sorted(missing)
    )
    rejects.sort(key=lambda r: r.line)
    report = IngestReport(
        lines_read=len(nonblank),
        blank=blank,
        ingested=len(ingested),
        rejected=len({r.line for r in rejects}),
        traces=len(traces),
        reasons=Counter(f"{r.category}: {_reason_key(r.reason)}" for r in rejects),
    )
    return traces, rejects, report


def _reason_key(reason: str) -> str:
    """Reason without its per-line details (text after ' — '), for counting."""
    return reason.split(" — ", 1)[0]


def cut(text: str) -> str:
    """The first EXCERPT_CHARS characters, extended to the end of the word they stop in, so
    that a secret is never cut to a prefix too short for the scrubber to recognize."""
    if len(text) <= EXCERPT_CHARS:
        return text
    tail = re.match(r"[^\s,\"]{0,2000}", text[EXCERPT_CHARS:])
    return text[:EXCERPT_CHARS] + (tail.group() if tail else "")


def excerpt(obj: Any) -> str:
    """A short JSON excerpt of a rejected object (scrubbed later with the rest)."""
    return cut(json.dumps(obj, ensure_ascii=False))
