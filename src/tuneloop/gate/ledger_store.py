"""The gate ledger's file: schema, versions, connections and transactions (stdlib sqlite3).

WAL journal so readers never block the writer; `synchronous=FULL`; transactions are explicit
`BEGIN IMMEDIATE` … `COMMIT`. Schema version 3 upgrades an older file in place by adding
tables (3: the flywheel's rounds and their outcomes) and a column (2: verdict evidence);
nothing is rewritten. A file that is not a SQLite database, or one written
by a newer tuneloop, is refused with an `InputError` naming it and is left untouched. The
queries live in `tuneloop.gate.ledger`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tuneloop.errors import InputError

SCHEMA_VERSION = 3

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS consumed_slices (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    slice TEXT NOT NULL,
    suite_revision TEXT NOT NULL,
    items_sha256 TEXT NOT NULL,
    n_items INTEGER NOT NULL,
    run_id TEXT NOT NULL,
    consumed_at TEXT NOT NULL,
    reuse_allowed INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS consumed_by_name ON consumed_slices (slice, suite_revision);
CREATE INDEX IF NOT EXISTS consumed_by_items ON consumed_slices (items_sha256);
CREATE TABLE IF NOT EXISTS verdicts (
    run_id TEXT PRIMARY KEY,
    decided_at TEXT NOT NULL,
    slice TEXT NOT NULL,
    suite_revision TEXT NOT NULL,
    decision TEXT NOT NULL,
    record TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS champions (
    version INTEGER PRIMARY KEY,
    run_id TEXT,
    promoted_at TEXT NOT NULL,
    via TEXT NOT NULL,
    descriptor TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS approvals (
    run_id TEXT PRIMARY KEY,
    approved_at TEXT NOT NULL,
    champion_version INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS consumed_items (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    suite_revision TEXT NOT NULL,
    item_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    consumed_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS consumed_item ON consumed_items (suite_revision, item_id);
CREATE TABLE IF NOT EXISTS sealed_bars (
    seal_id TEXT PRIMARY KEY,
    bar_sha256 TEXT NOT NULL,
    record TEXT NOT NULL,
    sealed_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS promotable (
    run_id TEXT PRIMARY KEY,
    descriptor TEXT NOT NULL,
    recorded_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS resets (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    reset_at TEXT NOT NULL,
    who TEXT NOT NULL,
    reason TEXT NOT NULL,
    items_upto INTEGER NOT NULL,
    slices_upto INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS rounds (
    round_id TEXT PRIMARY KEY,
    started_at TEXT NOT NULL,
    parent_version INTEGER,
    gate_slice TEXT NOT NULL,
    record TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS round_outcomes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    round_id TEXT NOT NULL,
    ended_at TEXT NOT NULL,
    outcome TEXT NOT NULL,
    run_id TEXT,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS outcome_by_round ON round_outcomes (round_id);
"""


def connect(path: Path) -> sqlite3.Connection:
    """Open (creating if needed) the ledger; transactions are explicit (`transaction`).

    A file that is not a tuneloop ledger (not SQLite, truncated, a folder, unwritable) or was
    written by a newer tuneloop raises `InputError` naming it; nothing is written to it.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, isolation_level=None, timeout=30.0)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        if _check_version(conn, path) != SCHEMA_VERSION:
            conn.executescript(_SCHEMA)
            _upgrade(conn)
            conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
    except sqlite3.DatabaseError as err:
        raise InputError(
            f"{path}: not a readable tuneloop ledger ({err}); it is never overwritten — "
            "restore it from a backup, or point gate.ledger at another file"
        ) from None
    except OSError as err:
        raise InputError(f"{path}: cannot open the ledger: {err.strerror or err}") from None
    return conn


def _check_version(conn: sqlite3.Connection, path: Path) -> int:
    """The file's schema version (0 for a new file); refuse one newer than this code."""
    has_meta = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
    ).fetchone()
    if not has_meta:
        return 0
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    version = int(row["value"]) if row is not None else 0
    if version > SCHEMA_VERSION:
        raise InputError(
            f"{path}: ledger schema version {version} is newer than this tuneloop "
            f"understands ({SCHEMA_VERSION}); upgrade tuneloop"
        )
    return version


def _upgrade(conn: sqlite3.Connection) -> None:
    """Version 1 → 2: the evidence column on verdicts (old verdicts have none: never reused)."""
    columns = {r["name"] for r in conn.execute("PRAGMA table_info(verdicts)").fetchall()}
    if "evidence_sha256" not in columns:
        conn.execute("ALTER TABLE verdicts ADD COLUMN evidence_sha256 TEXT")
    conn.execute("CREATE INDEX IF NOT EXISTS verdict_evidence ON verdicts (evidence_sha256)")


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
