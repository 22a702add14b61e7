"""The gate ledger's file: its schema, its versions and how it is opened (stdlib sqlite3).

Opened through `tuneloop.records.sqlite` (WAL journal, `synchronous=FULL`, explicit
`BEGIN IMMEDIATE` transactions). Schema version 6 upgrades an older file in place by adding
tables (3: the flywheel's rounds and their outcomes; 4: declared item changes; 5: a portfolio
round's spend approvals; 6: the α each round of a sequence rule spent, `alpha_spent`) and columns
(2: verdict evidence; 4: each consumed item's content hash); nothing is rewritten. A look
recorded before version 4 has no content hash: its item stays consumed by id, whatever its
content now (`tuneloop.gate.looks`). A file that is not a SQLite database, or one written by a newer
tuneloop, is refused with an `InputError` naming it and is left untouched. `open_ledger`
(`tuneloop.gate.ledger.queries`) opens it as `LEDGER_FILE`.
"""

from __future__ import annotations

import sqlite3

from tuneloop.records import SqliteFile

SCHEMA_VERSION = 6

SCHEMA = """
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
    consumed_at TEXT NOT NULL,
    content_sha256 TEXT
);
CREATE INDEX IF NOT EXISTS consumed_item ON consumed_items (suite_revision, item_id);
CREATE INDEX IF NOT EXISTS consumed_item_id ON consumed_items (item_id);
CREATE TABLE IF NOT EXISTS item_changes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    item_id TEXT NOT NULL,
    old_sha256 TEXT,
    new_sha256 TEXT NOT NULL,
    suite_revision TEXT NOT NULL,
    run_id TEXT NOT NULL,
    declared_at TEXT NOT NULL,
    reason TEXT NOT NULL
);
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
CREATE TABLE IF NOT EXISTS spend_approvals (
    spend_key TEXT PRIMARY KEY,
    approved_at TEXT NOT NULL,
    how TEXT NOT NULL,
    record TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS alpha_spent (
    seal_id TEXT PRIMARY KEY,
    k INTEGER NOT NULL UNIQUE,
    rule TEXT NOT NULL,
    alpha REAL NOT NULL,
    total_alpha REAL NOT NULL,
    bar_sha256 TEXT NOT NULL,
    spent_at TEXT NOT NULL,
    record TEXT NOT NULL
);
"""


def _upgrade(conn: sqlite3.Connection) -> None:
    """Version 1 → 2: the evidence column on verdicts (old verdicts have none: never reused).
    Version 3 → 4: the content hash of consumed items (old looks have none: consumed by id)."""
    _add_column(conn, "verdicts", "evidence_sha256")
    conn.execute("CREATE INDEX IF NOT EXISTS verdict_evidence ON verdicts (evidence_sha256)")
    _add_column(conn, "consumed_items", "content_sha256")


def _add_column(conn: sqlite3.Connection, table: str, column: str) -> None:
    columns = {r["name"] for r in conn.execute(f"PRAGMA table_info({table})").fetchall()}
    if column not in columns:
        conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} TEXT")


LEDGER_FILE = SqliteFile(
    schema=SCHEMA,
    version=SCHEMA_VERSION,
    what="ledger",
    unreadable="not a readable tuneloop ledger ({err}); it is never overwritten — restore it "
    "from a backup, or point gate.ledger at another file",
    newer="ledger schema version {found} is newer than this tuneloop understands "
    "({version}); upgrade tuneloop",
    upgrade=_upgrade,
)
