"""The ledger's rounds: one row per flywheel round when it starts, one per outcome (append-only).

A round (DESIGN.md, "Round") is one run of the loop from a parent champion on a fresh gate
slice. Its start row holds its lineage (parent champion version and descriptor, gate slice,
trigger); each time it ends — promoted, rejected, refused before training, failed or
interrupted and later resumed — an outcome row is appended, so the history of a round that
was interrupted and resumed keeps both. The latest outcome is the round's state.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any


def add_round(conn: sqlite3.Connection, record: dict[str, Any]) -> None:
    """Record a round's start (idempotent for the same round id and record)."""
    row = conn.execute("SELECT record FROM rounds WHERE round_id = ?", (record["round_id"],))
    existing = row.fetchone()
    if existing is not None:
        return
    conn.execute(
        "INSERT INTO rounds (round_id, started_at, parent_version, gate_slice, record) "
        "VALUES (?, ?, ?, ?, ?)",
        (
            record["round_id"],
            record["started_at"],
            record.get("parent_version"),
            record["gate_slice"],
            json.dumps(record, ensure_ascii=False, sort_keys=True),
        ),
    )


def add_outcome(conn: sqlite3.Connection, record: dict[str, Any]) -> None:
    """Append one outcome of a round."""
    conn.execute(
        "INSERT INTO round_outcomes (round_id, ended_at, outcome, run_id, record) "
        "VALUES (?, ?, ?, ?, ?)",
        (
            record["round_id"],
            record["ended_at"],
            record["outcome"],
            record.get("run_id"),
            json.dumps(record, ensure_ascii=False, sort_keys=True),
        ),
    )


def rounds(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every round, oldest first, each with its `outcomes` (oldest first)."""
    outcomes: dict[str, list[dict[str, Any]]] = {}
    for r in conn.execute("SELECT round_id, record FROM round_outcomes ORDER BY id"):
        outcomes.setdefault(r["round_id"], []).append(json.loads(r["record"]))
    out = []
    for r in conn.execute("SELECT round_id, record FROM rounds ORDER BY started_at, round_id"):
        out.append({**json.loads(r["record"]), "outcomes": outcomes.get(r["round_id"], [])})
    return out
