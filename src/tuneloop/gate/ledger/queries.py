"""`open_ledger(path)`: the gate ledger as one object whose methods return typed rows.

    with open_ledger(path) as ledger:
        with ledger.transaction():
            if ledger.current_champion() is None:
                ledger.add_champion(descriptor, run_id=None, at=now, via="bootstrap")

A change that belongs together — a round's consumed items and its verdict — is written in
one `transaction()` (`BEGIN IMMEDIATE`), so a crash leaves either all of it or none. Rows are
only ever inserted: a re-promotion is a new champion version, an approval a new row, a reset
of the one-look history a `resets` row (earlier looks stay on record; they just stop counting).

One-look is kept per ITEM, not per slice or revision: every item id a verdict looked at is
stored with its content hash (and the suite revision it came from), and a look holds for the
id under every later revision — so neither changing the slice fractions nor editing the suite
makes a "fresh" item out of a consumed one (`tuneloop.gate.looks` classifies the items).

A verdict is stored with the sha256 of its evidence (both logs, both models, the bar, the
items); it is found again only by that hash (`verdict_for_evidence`), which is how a resumed
round reuses its decision and a changed round never does.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tuneloop.gate.ledger.rounds import Round, RoundOutcome, RoundStart
from tuneloop.gate.ledger.rows import (
    AlphaSpend,
    Approval,
    Champion,
    Consumption,
    ItemChange,
    ItemLook,
    Promotable,
    Reset,
    RevisionLooks,
    SealedBar,
    SpendApproval,
    read_alpha_spend,
    read_approval,
    read_champion,
    read_consumption,
    read_item_change,
    read_promotable,
    read_reset,
    read_round,
    read_round_outcome,
    read_sealed_bar,
    read_verdict,
)
from tuneloop.gate.ledger.store import LEDGER_FILE
from tuneloop.gate.verdict_record import GateVerdict
from tuneloop.records import open_sqlite, transaction


@contextmanager
def open_ledger(path: Path) -> Iterator[Ledger]:
    """Open (creating if needed) the ledger at `path`; closed when the block ends.

    A file that is not a tuneloop ledger (not SQLite, truncated, a folder, unwritable) or was
    written by a newer tuneloop raises `InputError` naming it; nothing is written to it.
    """
    path = Path(path)
    conn = open_sqlite(path, LEDGER_FILE)
    try:
        yield Ledger(conn, path)
    finally:
        conn.close()


def last_outcome(path: Path | None, round_id: str) -> RoundOutcome | None:
    """The latest recorded outcome of round `round_id` (None: never ended, or no ledger yet —
    the file is not created)."""
    if path is None or not Path(path).is_file():
        return None
    with open_ledger(path) as ledger:
        return ledger.last_outcome(round_id)


class Ledger:
    """An open ledger. Reads see every committed row; writes go inside `transaction()`."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self.conn = conn
        self.path = path

    @contextmanager
    def transaction(self) -> Iterator[Ledger]:
        """`BEGIN IMMEDIATE` … `COMMIT`, or `ROLLBACK` on any exception."""
        with transaction(self.conn):
            yield self

    # ---- one look per item ---------------------------------------------------------------

    def consumptions(
        self, slice_name: str, suite_revision: str, items_sha256: str
    ) -> list[Consumption]:
        """Earlier looks at this slice (same name and revision, or the same item set)."""
        reset = self.last_reset()
        found = self.conn.execute(
            "SELECT * FROM consumed_slices WHERE ((slice = ? AND suite_revision = ?) "
            "OR items_sha256 = ?) AND id > ? ORDER BY id",
            (slice_name, suite_revision, items_sha256, reset.slices_upto if reset else 0),
        ).fetchall()
        return [read_consumption(r) for r in found]

    def consume(self, c: Consumption) -> None:
        self.conn.execute(
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

    def item_looks(
        self, item_ids: list[str], *, except_run: str | None = None
    ) -> dict[str, list[ItemLook]]:
        """Item id → its looks since the last reset (oldest first), under any suite revision;
        `except_run`: leave out that run's own looks (a resumed round's items stay its own)."""
        reset = self.last_reset()
        wanted = set(item_ids)
        found = self.conn.execute(
            "SELECT item_id, run_id, consumed_at, content_sha256, suite_revision "
            "FROM consumed_items WHERE id > ? ORDER BY id",
            (reset.items_upto if reset else 0,),
        ).fetchall()
        out: dict[str, list[ItemLook]] = {}
        for r in found:
            if r["item_id"] in wanted and r["run_id"] != except_run:
                look = ItemLook(
                    r["run_id"], r["consumed_at"], r["content_sha256"], r["suite_revision"]
                )
                out.setdefault(r["item_id"], []).append(look)
        return out

    def consumed_summary(self) -> list[RevisionLooks]:
        """Items and runs per suite revision looked at since the last reset."""
        reset = self.last_reset()
        found = self.conn.execute(
            "SELECT suite_revision, COUNT(DISTINCT item_id) AS n, COUNT(DISTINCT run_id) AS runs "
            "FROM consumed_items WHERE id > ? GROUP BY suite_revision ORDER BY suite_revision",
            (reset.items_upto if reset else 0,),
        ).fetchall()
        return [RevisionLooks(r["suite_revision"], r["n"], r["runs"]) for r in found]

    def consumed_rows(self) -> list[tuple[str, ItemLook]]:
        """(item id, look) of every look since the last reset, oldest first."""
        reset = self.last_reset()
        found = self.conn.execute(
            "SELECT item_id, run_id, consumed_at, content_sha256, suite_revision "
            "FROM consumed_items WHERE id > ? ORDER BY id",
            (reset.items_upto if reset else 0,),
        ).fetchall()
        return [
            (
                r["item_id"],
                ItemLook(r["run_id"], r["consumed_at"], r["content_sha256"], r["suite_revision"]),
            )
            for r in found
        ]

    def consume_items(
        self,
        suite_revision: str,
        item_ids: list[str],
        run_id: str,
        at: str,
        hashes: dict[str, str] | None = None,
    ) -> None:
        """Record one look at each item, with its content hash when `hashes` has it."""
        hashes = hashes or {}
        self.conn.executemany(
            "INSERT INTO consumed_items (suite_revision, item_id, run_id, consumed_at, "
            "content_sha256) VALUES (?, ?, ?, ?, ?)",
            [(suite_revision, i, run_id, at, hashes.get(i)) for i in item_ids],
        )

    def add_item_changes(self, changes: list[ItemChange]) -> None:
        """Record consumed ids whose changed content was declared new (append-only)."""
        self.conn.executemany(
            "INSERT INTO item_changes (item_id, old_sha256, new_sha256, suite_revision, run_id, "
            "declared_at, reason) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    c.item_id,
                    c.old_sha256,
                    c.new_sha256,
                    c.suite_revision,
                    c.run_id,
                    c.declared_at,
                    c.reason,
                )
                for c in changes
            ],
        )

    def renewed_items(self, item_ids: list[str]) -> dict[str, set[str]]:
        """Item id → the new content hashes declared new items (`add_item_changes`: by a
        verdict under `suite.item_changes: new`, or by `tuneloop ledger renew`) since the last
        reset."""
        reset = self.last_reset()
        wanted = set(item_ids)
        out: dict[str, set[str]] = {}
        found = self.conn.execute(
            "SELECT item_id, new_sha256 FROM item_changes WHERE declared_at >= ? ORDER BY id",
            (reset.reset_at if reset else "",),
        ).fetchall()
        for r in found:
            if r["item_id"] in wanted:
                out.setdefault(r["item_id"], set()).add(r["new_sha256"])
        return out

    def item_changes(self) -> list[ItemChange]:
        """Every declared item change, oldest first."""
        found = self.conn.execute("SELECT * FROM item_changes ORDER BY id").fetchall()
        return [read_item_change(r) for r in found]

    def last_reset(self) -> Reset | None:
        row = self.conn.execute("SELECT * FROM resets ORDER BY id DESC LIMIT 1").fetchone()
        return read_reset(row) if row else None

    def add_reset(self, at: str, who: str, reason: str) -> None:
        """Looks recorded so far stop counting for the one-look rule; they stay in the file."""
        items = self.conn.execute("SELECT COALESCE(MAX(id), 0) FROM consumed_items").fetchone()[0]
        slices = self.conn.execute("SELECT COALESCE(MAX(id), 0) FROM consumed_slices").fetchone()[0]
        self.conn.execute(
            "INSERT INTO resets (reset_at, who, reason, items_upto, slices_upto) "
            "VALUES (?, ?, ?, ?, ?)",
            (at, who, reason, items, slices),
        )

    # ---- verdicts and sealed bars --------------------------------------------------------

    def add_verdict(self, verdict: GateVerdict) -> None:
        self.conn.execute(
            "INSERT INTO verdicts (run_id, decided_at, slice, suite_revision, decision, record, "
            "evidence_sha256) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                verdict.run_id,
                verdict.decided_at,
                verdict.slice,
                verdict.suite_revision,
                verdict.decision,
                _json(verdict.to_json()),
                verdict.evidence_sha256,
            ),
        )

    def verdict_for_evidence(self, evidence_sha256: str) -> GateVerdict | None:
        """The verdict that judged exactly this evidence, or None."""
        row = self.conn.execute(
            "SELECT run_id, record FROM verdicts WHERE evidence_sha256 = ? ORDER BY rowid LIMIT 1",
            (evidence_sha256,),
        ).fetchone()
        return read_verdict(row, self.where) if row else None

    def verdict(self, run_id: str) -> GateVerdict | None:
        """The verdict of `run_id` as stored, or None."""
        row = self.conn.execute(
            "SELECT run_id, record FROM verdicts WHERE run_id = ?", (run_id,)
        ).fetchone()
        return read_verdict(row, self.where) if row else None

    def verdicts(self) -> list[GateVerdict]:
        """Every verdict, oldest first."""
        found = self.conn.execute(
            "SELECT run_id, record FROM verdicts ORDER BY decided_at, rowid"
        ).fetchall()
        return [read_verdict(r, self.where) for r in found]

    def seal(self, sealed: SealedBar) -> None:
        self.conn.execute(
            "INSERT INTO sealed_bars (seal_id, bar_sha256, record, sealed_at) VALUES (?, ?, ?, ?)",
            (sealed.seal_id, sealed.bar_sha256, _json(sealed.to_json()), sealed.sealed_at),
        )

    def sealed(self, seal_id: str) -> SealedBar | None:
        row = self.conn.execute(
            "SELECT * FROM sealed_bars WHERE seal_id = ?", (seal_id,)
        ).fetchone()
        return read_sealed_bar(row, self.where) if row else None

    def bar_seals(self) -> list[SealedBar]:
        """Every round's sealed bar (not the rules sealed beside them), oldest first."""
        found = self.conn.execute("SELECT * FROM sealed_bars ORDER BY sealed_at, rowid").fetchall()
        seals = [read_sealed_bar(r, self.where) for r in found]
        return [s for s in seals if s.is_bar]

    # ---- the flywheel's error budget (`gate.sequence`) -----------------------------------

    def add_alpha_spent(self, spent: AlphaSpend) -> None:
        """Record the α a round of the sequence spent (inside the seal's transaction)."""
        self.conn.execute(
            "INSERT INTO alpha_spent (seal_id, k, rule, alpha, total_alpha, bar_sha256, "
            "spent_at, record) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                spent.seal_id,
                spent.k,
                spent.rule,
                spent.alpha,
                spent.total_alpha,
                spent.bar_sha256,
                spent.spent_at,
                _json(spent.term.model_dump(mode="json", exclude_none=True), sort_keys=True),
            ),
        )

    def alpha_spent(self) -> list[AlphaSpend]:
        """The rounds of the sequence, in order (k = 1, 2, …)."""
        found = self.conn.execute("SELECT * FROM alpha_spent ORDER BY k").fetchall()
        return [read_alpha_spend(r, self.where) for r in found]

    # ---- champions -----------------------------------------------------------------------

    def add_promotable(self, run_id: str, descriptor: dict[str, Any], at: str) -> None:
        self.conn.execute(
            "INSERT OR IGNORE INTO promotable (run_id, descriptor, recorded_at) VALUES (?, ?, ?)",
            (run_id, _json(descriptor), at),
        )

    def promotable(self, run_id: str) -> Promotable | None:
        """The verified, final-place descriptor of a run's challenger, once its run finished."""
        row = self.conn.execute("SELECT * FROM promotable WHERE run_id = ?", (run_id,)).fetchone()
        return read_promotable(row, self.where) if row else None

    def next_champion_version(self) -> int:
        row = self.conn.execute("SELECT MAX(version) AS v FROM champions").fetchone()
        return int(row["v"] or 0) + 1

    def add_champion(
        self, descriptor: dict[str, Any], *, run_id: str | None, at: str, via: str
    ) -> int:
        """Insert the next champion version; returns its number."""
        version = self.next_champion_version()
        self.conn.execute(
            "INSERT INTO champions (version, run_id, promoted_at, via, descriptor) "
            "VALUES (?, ?, ?, ?, ?)",
            (version, run_id, at, via, _json(descriptor)),
        )
        return version

    def champions(self) -> list[Champion]:
        """Every champion version, oldest first."""
        found = self.conn.execute("SELECT * FROM champions ORDER BY version").fetchall()
        return [read_champion(r, self.where) for r in found]

    def current_champion(self) -> Champion | None:
        row = self.conn.execute("SELECT * FROM champions ORDER BY version DESC LIMIT 1").fetchone()
        return read_champion(row, self.where) if row else None

    def champion_of_run(self, run_id: str) -> Champion | None:
        """The champion version a run's promotion created, if any (the first, if several)."""
        row = self.conn.execute(
            "SELECT * FROM champions WHERE run_id = ? ORDER BY version LIMIT 1", (run_id,)
        ).fetchone()
        return read_champion(row, self.where) if row else None

    def approval(self, run_id: str) -> Approval | None:
        row = self.conn.execute("SELECT * FROM approvals WHERE run_id = ?", (run_id,)).fetchone()
        return read_approval(row) if row else None

    def add_approval(self, run_id: str, at: str, version: int) -> None:
        self.conn.execute(
            "INSERT INTO approvals (run_id, approved_at, champion_version) VALUES (?, ?, ?)",
            (run_id, at, version),
        )

    # ---- a portfolio round's spend -------------------------------------------------------

    def spend_approval(self, key: str) -> SpendApproval | None:
        row = self.conn.execute(
            "SELECT * FROM spend_approvals WHERE spend_key = ?", (key,)
        ).fetchone()
        return SpendApproval(row["spend_key"], row["approved_at"], row["how"]) if row else None

    def add_spend_approval(self, key: str, at: str, how: str, record: dict[str, Any]) -> None:
        """Approve the spend `key` names (`record`: what was approved, for the reader)."""
        self.conn.execute(
            "INSERT INTO spend_approvals (spend_key, approved_at, how, record) VALUES (?, ?, ?, ?)",
            (key, at, how, _json(record, sort_keys=True)),
        )

    # ---- rounds --------------------------------------------------------------------------

    def add_round(self, start: RoundStart) -> None:
        """Record a round's start (a no-op when the round id has one already)."""
        existing = self.conn.execute(
            "SELECT 1 FROM rounds WHERE round_id = ?", (start.round_id,)
        ).fetchone()
        if existing is not None:
            return
        self.conn.execute(
            "INSERT INTO rounds (round_id, started_at, parent_version, gate_slice, record) "
            "VALUES (?, ?, ?, ?, ?)",
            (
                start.round_id,
                start.started_at,
                start.parent_version,
                start.gate_slice,
                _json(start.model_dump(mode="json", exclude_unset=True), sort_keys=True),
            ),
        )

    def add_outcome(self, outcome: RoundOutcome) -> None:
        """Append one outcome of a round."""
        self.conn.execute(
            "INSERT INTO round_outcomes (round_id, ended_at, outcome, run_id, record) "
            "VALUES (?, ?, ?, ?, ?)",
            (
                outcome.round_id,
                outcome.ended_at,
                outcome.outcome,
                outcome.run_id,
                _json(outcome.to_json(), sort_keys=True),
            ),
        )

    def rounds(self) -> list[Round]:
        """Every round, oldest first, each with its outcomes (oldest first)."""
        ends: dict[str, list[sqlite3.Row]] = {}
        for r in self.conn.execute("SELECT round_id, record FROM round_outcomes ORDER BY id"):
            ends.setdefault(r["round_id"], []).append(r)
        starts = self.conn.execute(
            "SELECT round_id, record FROM rounds ORDER BY started_at, round_id"
        ).fetchall()
        return [read_round(s, ends.get(s["round_id"], []), self.where) for s in starts]

    def last_outcome(self, round_id: str) -> RoundOutcome | None:
        """The latest outcome of a started round (None: not started, or not ended yet)."""
        row = self.conn.execute(
            "SELECT o.round_id, o.record FROM round_outcomes AS o JOIN rounds AS r "
            "ON r.round_id = o.round_id WHERE o.round_id = ? ORDER BY o.id DESC LIMIT 1",
            (round_id,),
        ).fetchone()
        return read_round_outcome(row, self.where) if row else None

    @property
    def where(self) -> str:
        """The ledger, for error messages."""
        return str(self.path)


def _json(data: dict[str, Any], *, sort_keys: bool = False) -> str:
    return json.dumps(data, ensure_ascii=False, sort_keys=sort_keys)
