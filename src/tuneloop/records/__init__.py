"""Versioned artifact records, the typed reader, and the file I/O every phase shares.

Phases talk to each other only through files on disk. Each JSON artifact is a `Record`
carrying `"schema": "tuneloop.<kind>/<n>"`, and is read back only with
`read_record(path, Cls)`, which refuses a record of another kind or a newer version with an
error that names the file. Every record class is listed in `catalog.RECORDS` and can be
reached from here by name (`tuneloop.records.GateVerdict`), loaded lazily so that this core
package never imports a phase.

- `base`: `Record`, `read_record`, `write_record`, `parse_record`, `check_schema`;
- `disk`: atomic writes (temp file, fsync, rename), JSON/JSONL with errors that name file and
  line, sha256 of files and folders;
- `manifest`, `corpus`, `replay`, `trace`: the records that need nothing but this package
  (`trace`: the canonical conversation that the data and replay phases both read);
- `catalog`: every record class, wherever it is defined;
- `sqlite`: the one way tuneloop opens, versions and writes its SQLite files (the gate
  ledger, the watcher's state).
"""

from __future__ import annotations

from typing import Any

from tuneloop.records.base import (
    Record,
    check_schema,
    parse_record,
    read_record,
    read_record_if_exists,
    write_record,
)
from tuneloop.records.catalog import RECORDS, record_class, record_classes
from tuneloop.records.corpus import CorpusProvenance
from tuneloop.records.disk import (
    append_jsonl,
    append_lines,
    atomic_write_bytes,
    atomic_write_text,
    canonical_json,
    fsync_dir,
    iter_jsonl,
    jsonl_line,
    read_json,
    read_jsonl,
    repair_jsonl_tail,
    sha256_bytes,
    sha256_file,
    sha256_path,
    sha256_tree,
    write_json,
    write_jsonl,
    write_lines,
)
from tuneloop.records.manifest import (
    Archived,
    InputPin,
    Manifest,
    ManifestFile,
    PhaseLineage,
    PinnedFile,
)
from tuneloop.records.sqlite import SqliteFile, open_sqlite, transaction
from tuneloop.records.trace import Trace

__all__ = [
    "RECORDS",
    "Archived",
    "CorpusProvenance",
    "InputPin",
    "Manifest",
    "ManifestFile",
    "PhaseLineage",
    "PinnedFile",
    "Record",
    "SqliteFile",
    "Trace",
    "append_jsonl",
    "append_lines",
    "atomic_write_bytes",
    "atomic_write_text",
    "canonical_json",
    "check_schema",
    "fsync_dir",
    "iter_jsonl",
    "jsonl_line",
    "open_sqlite",
    "parse_record",
    "read_json",
    "read_jsonl",
    "read_record",
    "read_record_if_exists",
    "record_class",
    "record_classes",
    "repair_jsonl_tail",
    "sha256_bytes",
    "sha256_file",
    "sha256_path",
    "sha256_tree",
    "transaction",
    "write_json",
    "write_jsonl",
    "write_lines",
    "write_record",
]


def __getattr__(name: str) -> Any:
    # records defined beside their phase, loaded on first use (PEP 562)
    if name in RECORDS:
        return record_class(name)
    raise AttributeError(f"module 'tuneloop.records' has no attribute {name!r}")
