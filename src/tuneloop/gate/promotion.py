"""Champion versions outside a gate round: approve a pending promotion, register a base, show.

`approve(run_id)` completes a verdict that stopped at `awaiting_approval`: the challenger's
descriptor from that verdict becomes the next champion version, and the approval is recorded
(once — approving twice is refused). `register_champion` records a champion that did not come
through the gate (the base model a loop starts from) so that later verdicts can name it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuneloop.errors import InputError
from tuneloop.gate import explog, ledger
from tuneloop.gate.champion import parse_descriptor
from tuneloop.gate.verdict import now


def approve(run_id: str, ledger_path: Path) -> int:
    """Promote the challenger of `run_id`'s awaiting verdict; returns the new champion version."""
    ledger_path = Path(ledger_path)
    if not ledger_path.exists():
        raise InputError(f"{ledger_path}: no ledger here; `tuneloop gate` creates it")
    conn = ledger.connect(ledger_path)
    try:
        with ledger.transaction(conn):
            stored = ledger.verdict(conn, run_id)
            if stored is None:
                raise InputError(f"{ledger_path}: no verdict for run {run_id!r}")
            if stored["decision"] != "awaiting_approval":
                raise InputError(
                    f"run {run_id!r} has decision {stored['decision']!r}; only an "
                    "'awaiting_approval' verdict can be approved"
                )
            done = ledger.approval(conn, run_id)
            if done is not None:
                raise InputError(
                    f"run {run_id!r} was already approved at {done['approved_at']} "
                    f"(champion v{done['champion_version']})"
                )
            at = now()
            descriptor = stored["challenger_descriptor"]
            version = ledger.add_champion(conn, descriptor, run_id=run_id, at=at, via="approval")
            ledger.add_approval(conn, run_id, at, version)
    finally:
        conn.close()
    explog.append_entry(
        explog.log_path(ledger_path),
        f"approval {run_id}",
        explog.approval_entry(run_id, at, version, descriptor),
    )
    return version


def register_champion(ledger_path: Path, descriptor: dict[str, Any], run_id: str | None) -> int:
    """Record a champion that did not pass through the gate (e.g. the base model)."""
    data = parse_descriptor(descriptor, "champion descriptor").model_dump(mode="json")
    conn = ledger.connect(Path(ledger_path))
    try:
        with ledger.transaction(conn):
            return ledger.add_champion(conn, data, run_id=run_id, at=now(), via="registered")
    finally:
        conn.close()


def champion_history(ledger_path: Path) -> list[dict[str, Any]]:
    """Every champion version, oldest first (empty if the ledger does not exist)."""
    ledger_path = Path(ledger_path)
    if not ledger_path.exists():
        return []
    conn = ledger.connect(ledger_path)
    try:
        return ledger.champions(conn)
    finally:
        conn.close()
