"""tuneloop's SQLite files: one way to open them, version them and write to them (stdlib sqlite3).

    LEDGER = SqliteFile(schema=..., version=3, what="ledger", unreadable="...", newer="...")
    conn = open_sqlite(path, LEDGER)
    with transaction(conn):
        conn.execute("INSERT ...")

Both files tuneloop keeps in SQLite — the gate ledger and the watcher's state — are opened
here: the parent folder is created, the journal is WAL (readers never block the writer),
`synchronous=FULL`, and transactions are explicit (`isolation_level=None`; `transaction` is
`BEGIN IMMEDIATE` … `COMMIT`, `ROLLBACK` on any exception). The file's schema version is
`meta.schema_version` (no `meta` table: a new file, version 0). A file at an older version
gets the schema script (every statement `IF NOT EXISTS`) and the file's own `upgrade`, then
the current version; one at the current version is not written to at all. A file written by a
newer tuneloop, or one that is not a SQLite database, is refused with an `InputError` naming
it, and is left untouched.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tuneloop.errors import InputError


@dataclass(frozen=True)
class SqliteFile:
    """One kind of tuneloop SQLite file: its schema, its version, and how its errors read."""

    schema: str
    """The schema script; every statement is `CREATE … IF NOT EXISTS` (run on older files)."""
    version: int
    """The schema version this code writes (`meta.schema_version`)."""
    what: str
    """The file in words, for `cannot open the {what}`."""
    unreadable: str
    """What follows `{path}: ` when the file is not a readable SQLite database; `{err}` is
    replaced by sqlite's message."""
    newer: str
    """What follows `{path}: ` for a file of a newer version; `{found}` and `{version}` are
    replaced by the file's and this code's versions."""
    upgrade: Callable[[sqlite3.Connection], None] | None = None
    """Changes the schema script cannot make (`ALTER TABLE …`), run after it on older files."""


def open_sqlite(path: Path, spec: SqliteFile) -> sqlite3.Connection:
    """Open (creating if needed) a tuneloop SQLite file; rows are `sqlite3.Row`.

    Raises `InputError` naming the file when it is not a readable database, cannot be opened
    or written (a folder, no permission) or was written by a newer tuneloop.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, isolation_level=None, timeout=30.0)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        if _schema_version(conn, path, spec) != spec.version:
            conn.executescript(spec.schema)  # idempotent (IF NOT EXISTS); commits by itself
            if spec.upgrade is not None:
                spec.upgrade(conn)
            conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                (str(spec.version),),
            )
    except sqlite3.DatabaseError as err:
        raise InputError(f"{path}: " + spec.unreadable.format(err=err)) from None
    except OSError as err:
        raise InputError(f"{path}: cannot open the {spec.what}: {err.strerror or err}") from None
    return conn


def _schema_version(conn: sqlite3.Connection, path: Path, spec: SqliteFile) -> int:
    """The file's schema version (0 for a new file); refuse one newer than this code."""
    has_meta = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
    ).fetchone()
    if not has_meta:
        return 0
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    found = int(row["value"]) if row is not None else 0
    if found > spec.version:
        raise InputError(f"{path}: " + spec.newer.format(found=found, version=spec.version))
    return found


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """`BEGIN IMMEDIATE` … `COMMIT`, or `ROLLBACK` on any exception."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
