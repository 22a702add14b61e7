"""The gate ledger: consumed slices, champion versions, verdicts and approvals, in SQLite.

One file (stdlib `sqlite3`, WAL journal so readers never block the writer). Every change of a
round — the slice it consumed, its verdict, the new champion version — is written in one
`BEGIN IMMEDIATE` transaction, so a crash leaves either all of them or none. Rows are only
ever inserted: a re-promotion is a new champion version, an approval a new row.

A slice is identified by its name and suite revision, and also by the hash of its item ids
(the same items under another name are the same look). Once consumed it is refused unless
reuse is explicitly allowed, and an allowed reuse is recorded as such.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1

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
"""


@dataclass(frozen=True)
class Consumption:
    """One look at a gate slice."""

    slice: str
    """The slice's name."""
    suite_revision: str
    """The suite revision the slice was drawn from."""
    items_sha256: str
    """Hash of the slice's sorted item ids."""
    n_items: int
    """Items on the slice."""
    run_id: str
    """The run that looked."""
    consumed_at: str
    """ISO-8601 UTC time of the look."""
    reuse_allowed: bool = False
    """True when this look was on an already consumed slice, explicitly allowed."""


def connect(path: Path) -> sqlite3.Connection:
    """Open (creating if needed) the ledger; transactions are explicit (`transaction`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None, timeout=30.0)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.executescript(_SCHEMA)
    conn.execute(
        "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)",
        (str(SCHEMA_VERSION),),
    )
    return conn


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


def consumptions(
    conn: sqlite3.Connection, slice_name: str, suite_revision: str, items_sha256: str
) -> list[Consumption]:
    """Earlier looks at this slice (same name and revision, or the same item set)."""
    rows = conn.execute(
        "SELECT * FROM consumed_slices WHERE (slice = ? AND suite_revision = ?) "
        "OR items_sha256 = ? ORDER BY id",
        (slice_name, suite_revision, items_sha256),
    ).fetchall()
    return [
        Consumption(
            r["slice"],
            r["suite_revision"],
            r["items_sha256"],
            r["n_items"],
            r["run_id"],
            r["consumed_at"],
            bool(r["reuse_allowed"]),
        )
        for r in rows
    ]


def consume(conn: sqlite3.Connection, c: Consumption) -> None:
    conn.execute(
        "INSERT INTO consumed_slices (slice, suite_revision, items_sha256, n_items, run_id, "
        "consumed_at, reuse_allowed) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            c.slice,
            c.suite_revision,
            c.items_sha256,
            c.n_items,
            c.run_id,
            c.consumed_at,
            int(c.reuse_allowed),
        ),
    )


def add_verdict(conn: sqlite3.Connection, record: dict[str, Any]) -> None:
    conn.execute(
        "INSERT INTO verdicts (run_id, decided_at, slice, suite_revision, decision, record) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (
            record["run_id"],
            record["decided_at"],
            record["slice"],
            record["suite_revision"],
            record["decision"],
            json.dumps(record, ensure_ascii=False),
        ),
    )


def verdict(conn: sqlite3.Connection, run_id: str) -> dict[str, Any] | None:
    """The verdict record of `run_id` as stored, or None."""
    row = conn.execute("SELECT record FROM verdicts WHERE run_id = ?", (run_id,)).fetchone()
    return json.loads(row["record"]) if row else None


def verdicts(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every verdict, oldest first."""
    rows = conn.execute("SELECT record FROM verdicts ORDER BY decided_at, rowid").fetchall()
    return [json.loads(r["record"]) for r in rows]


def next_champion_version(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT MAX(version) AS v FROM champions").fetchone()
    return int(row["v"] or 0) + 1


def add_champion(
    conn: sqlite3.Connection, descriptor: dict[str, Any], *, run_id: str | None, at: str, via: str
) -> int:
    """Insert the next champion version; returns its number."""
    version = next_champion_version(conn)
    conn.execute(
        "INSERT INTO champions (version, run_id, promoted_at, via, descriptor) "
        "VALUES (?, ?, ?, ?, ?)",
        (version, run_id, at, via, json.dumps(descriptor, ensure_ascii=False)),
    )
    return version


def champions(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every champion version, oldest first: version, run_id, promoted_at, via, descriptor."""
    rows = conn.execute("SELECT * FROM champions ORDER BY version").fetchall()
    return [
        {
            "version": r["version"],
            "run_id": r["run_id"],
            "promoted_at": r["promoted_at"],
            "via": r["via"],
            "descriptor": json.loads(r["descriptor"]),
        }
        for r in rows
    ]


def current_champion(conn: sqlite3.Connection) -> dict[str, Any] | None:
    history = champions(conn)
    return history[-1] if history else None


def approval(conn: sqlite3.Connection, run_id: str) -> dict[str, Any] | None:
    row = conn.execute("SELECT * FROM approvals WHERE run_id = ?", (run_id,)).fetchone()
    return dict(row) if row else None


def add_approval(conn: sqlite3.Connection, run_id: str, at: str, version: int) -> None:
    conn.execute(
        "INSERT INTO approvals (run_id, approved_at, champion_version) VALUES (?, ?, ?)",
        (run_id, at, version),
    )
