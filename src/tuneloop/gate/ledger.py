"""The gate ledger: consumed items, sealed bars, verdicts, champions and approvals, in SQLite.

One file (stdlib `sqlite3`, WAL journal so readers never block the writer). Every change of a
round — the items it consumed and its verdict — is written in one `BEGIN IMMEDIATE`
transaction, so a crash leaves either all of them or none. Rows are only ever inserted: a
re-promotion is a new champion version, an approval a new row, a reset of the one-look
history a `resets` row (earlier looks stay on record; they just stop counting).

One-look is kept per ITEM, not per slice: every item id a verdict looked at is stored with
its suite revision, and a slice that overlaps any of them is refused with the count — so
changing the slice fractions cannot make a "fresh" slice out of consumed items.

A verdict is stored with the sha256 of its evidence (both logs, both models, the bar, the
items); it is found again only by that hash (`verdict_for_evidence`), which is how a resumed
round reuses its decision and a changed round never does.

The file itself — schema, versions, connections, transactions — is `tuneloop.gate.ledger_store`;
this module holds the queries.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from tuneloop.gate.ledger_store import SCHEMA_VERSION as SCHEMA_VERSION
from tuneloop.gate.ledger_store import connect as connect
from tuneloop.gate.ledger_store import transaction as transaction


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


def consumptions(
    conn: sqlite3.Connection, slice_name: str, suite_revision: str, items_sha256: str
) -> list[Consumption]:
    """Earlier looks at this slice (same name and revision, or the same item set)."""
    reset = last_reset(conn)
    rows = conn.execute(
        "SELECT * FROM consumed_slices WHERE ((slice = ? AND suite_revision = ?) "
        "OR items_sha256 = ?) AND id > ? ORDER BY id",
        (slice_name, suite_revision, items_sha256, reset["slices_upto"] if reset else 0),
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
        "INSERT INTO verdicts (run_id, decided_at, slice, suite_revision, decision, record, "
        "evidence_sha256) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            record["run_id"],
            record["decided_at"],
            record["slice"],
            record["suite_revision"],
            record["decision"],
            json.dumps(record, ensure_ascii=False),
            record.get("evidence_sha256"),
        ),
    )


def verdict_for_evidence(conn: sqlite3.Connection, evidence_sha256: str) -> dict[str, Any] | None:
    """The verdict that judged exactly this evidence, or None."""
    row = conn.execute(
        "SELECT record FROM verdicts WHERE evidence_sha256 = ? ORDER BY rowid LIMIT 1",
        (evidence_sha256,),
    ).fetchone()
    return json.loads(row["record"]) if row else None


def last_reset(conn: sqlite3.Connection) -> dict[str, Any] | None:
    row = conn.execute("SELECT * FROM resets ORDER BY id DESC LIMIT 1").fetchone()
    return dict(row) if row else None


def consumed_items(
    conn: sqlite3.Connection, suite_revision: str, item_ids: list[str]
) -> dict[str, tuple[str, str]]:
    """Item id → (run id, consumed at) for the given items looked at since the last reset."""
    reset = last_reset(conn)
    wanted = set(item_ids)
    rows = conn.execute(
        "SELECT item_id, run_id, consumed_at FROM consumed_items "
        "WHERE suite_revision = ? AND id > ? ORDER BY id",
        (suite_revision, reset["items_upto"] if reset else 0),
    ).fetchall()
    out: dict[str, tuple[str, str]] = {}
    for r in rows:
        if r["item_id"] in wanted and r["item_id"] not in out:
            out[r["item_id"]] = (r["run_id"], r["consumed_at"])
    return out


def consumed_summary(conn: sqlite3.Connection) -> list[tuple[str, int, int]]:
    """(suite revision, items, runs) looked at since the last reset."""
    reset = last_reset(conn)
    rows = conn.execute(
        "SELECT suite_revision, COUNT(DISTINCT item_id) AS n, COUNT(DISTINCT run_id) AS runs "
        "FROM consumed_items WHERE id > ? GROUP BY suite_revision ORDER BY suite_revision",
        (reset["items_upto"] if reset else 0,),
    ).fetchall()
    return [(r["suite_revision"], r["n"], r["runs"]) for r in rows]


def consume_items(
    conn: sqlite3.Connection, suite_revision: str, item_ids: list[str], run_id: str, at: str
) -> None:
    conn.executemany(
        "INSERT INTO consumed_items (suite_revision, item_id, run_id, consumed_at) "
        "VALUES (?, ?, ?, ?)",
        [(suite_revision, i, run_id, at) for i in item_ids],
    )


def add_reset(conn: sqlite3.Connection, at: str, who: str, reason: str) -> None:
    """Looks recorded so far stop counting for the one-look rule; they stay in the file."""
    items = conn.execute("SELECT COALESCE(MAX(id), 0) FROM consumed_items").fetchone()[0]
    slices = conn.execute("SELECT COALESCE(MAX(id), 0) FROM consumed_slices").fetchone()[0]
    conn.execute(
        "INSERT INTO resets (reset_at, who, reason, items_upto, slices_upto) "
        "VALUES (?, ?, ?, ?, ?)",
        (at, who, reason, items, slices),
    )


def seal(conn: sqlite3.Connection, seal_id: str, record: dict[str, Any], at: str) -> None:
    conn.execute(
        "INSERT INTO sealed_bars (seal_id, bar_sha256, record, sealed_at) VALUES (?, ?, ?, ?)",
        (seal_id, record["bar_sha256"], json.dumps(record, ensure_ascii=False), at),
    )


def sealed(conn: sqlite3.Connection, seal_id: str) -> dict[str, Any] | None:
    row = conn.execute("SELECT * FROM sealed_bars WHERE seal_id = ?", (seal_id,)).fetchone()
    if row is None:
        return None
    return {**json.loads(row["record"]), "sealed_at": row["sealed_at"]}


def add_promotable(
    conn: sqlite3.Connection, run_id: str, descriptor: dict[str, Any], at: str
) -> None:
    conn.execute(
        "INSERT OR IGNORE INTO promotable (run_id, descriptor, recorded_at) VALUES (?, ?, ?)",
        (run_id, json.dumps(descriptor, ensure_ascii=False), at),
    )


def promotable(conn: sqlite3.Connection, run_id: str) -> dict[str, Any] | None:
    """The verified, final-place descriptor of a run's challenger, once its run finished."""
    row = conn.execute("SELECT descriptor FROM promotable WHERE run_id = ?", (run_id,)).fetchone()
    return json.loads(row["descriptor"]) if row else None


def champion_of_run(conn: sqlite3.Connection, run_id: str) -> dict[str, Any] | None:
    """The champion version a run's promotion created, if any."""
    return next((c for c in champions(conn) if c["run_id"] == run_id), None)


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
