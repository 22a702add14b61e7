"""The watcher's memory: `<workdir>/flywheel.db` — rounds, one row per decision, pacing.

    state = WatchState.open(FlywheelPaths(workdir).state)     # created on first use
    state.create_round(row, "round", "round r0001 for new_labels; …")

SQLite, opened like the ledger (`tuneloop.records.sqlite`: WAL journal, `synchronous=FULL`);
every change an explicit `BEGIN IMMEDIATE` transaction that also appends its line to
`decisions` — so the table of decisions and the state it describes never disagree, whatever
instant the watcher is killed at. Times are unix seconds from the watcher's clock (injectable
in tests).

A round moves `awaiting_approval` → `ready` → `running` ⇄ `interrupted` → `finished` or
`refused`. The first four are *open*: at most one round is open, and a restarted watcher
resumes it (the same id, the same trigger file) before it looks for a new trigger. That is
how a kill -9 never starts a second round for the same trigger. The trigger file's record
(`RoundTrigger`) is defined here too: it is what the round command receives.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from tuneloop.errors import InputError
from tuneloop.flywheel.paths import FlywheelPaths
from tuneloop.flywheel.triggers import Observations, PacingState, TriggerFiring
from tuneloop.records import Record, SqliteFile, open_sqlite, transaction

RoundStatus = Literal["awaiting_approval", "ready", "running", "interrupted", "finished", "refused"]
OPEN: tuple[RoundStatus, ...] = ("awaiting_approval", "ready", "running", "interrupted")
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rounds (
    round_id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    trigger TEXT NOT NULL,
    trigger_file TEXT NOT NULL,
    created_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    exit_code INTEGER,
    outcome TEXT,
    wall_s REAL NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    pid INTEGER,
    pid_started REAL,
    approved_by TEXT,
    approved_at REAL
);
CREATE TABLE IF NOT EXISTS decisions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    kind TEXT NOT NULL,
    round_id TEXT,
    message TEXT NOT NULL
);
"""

STATE_FILE = SqliteFile(
    schema=_SCHEMA,
    version=SCHEMA_VERSION,
    what="flywheel state",
    unreadable="not a readable flywheel state ({err}); move it aside to start a new one (the "
    "rounds it lists stay in the ledger and the workdir)",
    newer="flywheel state version {found} is newer than this tuneloop reads ({version}); "
    "upgrade tuneloop",
)


def open_watch_state(workdir: Path) -> WatchState | None:
    """The watcher's state of `workdir`, or None when no watcher has run there."""
    path = FlywheelPaths(workdir).state
    return WatchState.open(path, create=False) if path.is_file() else None


class CostEstimate(BaseModel):
    """What a round will spend, shown before a person approves it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    eval_items: int
    """Items evaluated per arm (the config's eval slice)."""
    eval_samples: int
    """Completions scored: items × n_samples × 2 arms (pre, post)."""
    train_steps: int
    """`train.steps` plus `train.sft_warmup_steps`."""
    seconds: float | None
    """Wall seconds of the last finished round; None when there is none."""
    seconds_basis: str
    """Where `seconds` comes from, in words."""

    def text(self) -> str:
        secs = f"~{self.seconds:.0f} s" if self.seconds is not None else "seconds unknown"
        return (
            f"{self.eval_items} items per arm ({self.eval_samples} completions), "
            f"{self.train_steps} training steps, {secs} ({self.seconds_basis})"
        )


class RoundTrigger(Record):
    """Why the watcher started a round: written to the trigger file the round records."""

    KIND = "round_trigger"
    VERSION = 1

    round_id: str
    decided_at: str
    """ISO-8601 UTC time of the look that fired."""
    fired: list[str]
    """Names of the triggers that fired (`new_labels`, `drift`, `accuracy`)."""
    firings: list[TriggerFiring]
    """Every configured trigger at that look, with its figure, threshold and words."""
    observations: Observations
    """What the look measured."""
    since: str | None
    """Start of the previous round: traffic after it counted as new; None before the first."""
    champion_version: int | None
    """The ledger's champion at that look (the round's parent)."""
    estimate: CostEstimate
    spend_approval: bool
    """Whether `approval.spend` made the round wait for `tuneloop approve`."""


@dataclass(frozen=True)
class RoundRow:
    round_id: str
    status: RoundStatus
    trigger: RoundTrigger
    trigger_file: Path
    created_at: float
    started_at: float | None
    finished_at: float | None
    exit_code: int | None
    outcome: str | None
    wall_s: float
    """Wall seconds over every attempt (a resumed round has several)."""
    attempts: int
    pid: int | None
    """The round process of the latest attempt."""
    pid_started: float | None
    """Its creation time (psutil), so that a reused pid is not mistaken for it."""
    approved_by: str | None
    approved_at: float | None


@dataclass(frozen=True)
class Decision:
    at: float
    kind: str
    round_id: str | None
    message: str


class WatchState:
    """The flywheel state file; every method is one transaction."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self.conn = conn
        self.path = path

    @classmethod
    def open(cls, path: Path, *, create: bool = True) -> WatchState:
        """Open `path` (creating it unless `create` is False); InputError naming the file."""
        path = Path(path)
        if not create and not path.is_file():
            raise InputError(f"{path}: no flywheel state here; `tuneloop watch` creates it")
        return cls(open_sqlite(path, STATE_FILE), path)

    def close(self) -> None:
        self.conn.close()

    # ---- reads ---------------------------------------------------------------------------

    def pacing(self) -> PacingState:
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'pacing'").fetchone()
        return PacingState.model_validate_json(row["value"]) if row else PacingState()

    def round(self, round_id: str) -> RoundRow | None:
        row = self.conn.execute("SELECT * FROM rounds WHERE round_id = ?", (round_id,)).fetchone()
        return _round(row) if row else None

    def open_round(self) -> RoundRow | None:
        """The round not yet finished or refused (at most one), oldest first."""
        marks = ",".join("?" * len(OPEN))
        row = self.conn.execute(
            f"SELECT * FROM rounds WHERE status IN ({marks}) ORDER BY round_id LIMIT 1", OPEN
        ).fetchone()
        return _round(row) if row else None

    def rounds(self, limit: int = 10) -> list[RoundRow]:
        """The latest `limit` rounds, oldest first."""
        rows = self.conn.execute(
            "SELECT * FROM rounds ORDER BY round_id DESC LIMIT ?", (limit,)
        ).fetchall()
        return [_round(r) for r in reversed(rows)]

    def last_finished(self) -> RoundRow | None:
        """The latest round that ran to a verdict (promoted or not)."""
        row = self.conn.execute(
            "SELECT * FROM rounds WHERE status = 'finished' AND exit_code IN (0, 1) "
            "ORDER BY round_id DESC LIMIT 1"
        ).fetchone()
        return _round(row) if row else None

    def decisions(self, limit: int = 20) -> list[Decision]:
        """The latest `limit` decisions, oldest first."""
        rows = self.conn.execute(
            "SELECT at, kind, round_id, message FROM decisions ORDER BY id DESC LIMIT ?",
            (limit,),
        ).fetchall()
        return [Decision(r["at"], r["kind"], r["round_id"], r["message"]) for r in reversed(rows)]

    def next_round_id(self, taken: Callable[[str], bool] = lambda _: False) -> str:
        """`r0001`, `r0002`, …: one past the last round, skipping ids `taken` (a round folder
        left by an earlier state file is never resumed by a new round)."""
        row = self.conn.execute("SELECT round_id FROM rounds ORDER BY round_id DESC").fetchone()
        n = int(row["round_id"][1:]) + 1 if row else 1
        while taken(f"r{n:04d}"):
            n += 1
        return f"r{n:04d}"

    # ---- writes (each with its decision line) ---------------------------------------------

    def log(self, kind: str, message: str, at: float, round_id: str | None = None) -> None:
        with transaction(self.conn):
            self._decide(kind, message, at, round_id)

    def after_poll(self, pacing: PacingState, message: str, at: float) -> None:
        with transaction(self.conn):
            self._set_pacing(pacing)
            self._decide("poll", message, at, None)

    def create_round(self, row: RoundRow, kind: str, message: str) -> None:
        """Record a new round (before anything runs)."""
        with transaction(self.conn):
            self.conn.execute(
                "INSERT INTO rounds (round_id, status, trigger, trigger_file, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (
                    row.round_id,
                    row.status,
                    json.dumps(row.trigger.to_json()),
                    str(row.trigger_file),
                    row.created_at,
                ),
            )
            self._decide(kind, message, row.created_at, row.round_id)

    def approve(self, round_id: str, who: str, at: float) -> RoundRow:
        """`awaiting_approval` → `ready`; InputError for any other state."""
        with transaction(self.conn):
            row = self.round(round_id)
            if row is None:
                raise InputError(f"{self.path}: no round {round_id!r} in the flywheel state")
            if row.status != "awaiting_approval":
                raise InputError(
                    f"round {round_id} is {row.status.replace('_', ' ')}, not awaiting "
                    "approval; nothing to approve"
                )
            self.conn.execute(
                "UPDATE rounds SET status = 'ready', approved_by = ?, approved_at = ? "
                "WHERE round_id = ?",
                (who, at, round_id),
            )
            self._decide("approved", f"{who} approved round {round_id}'s spend", at, round_id)
        approved = self.round(round_id)
        assert approved is not None
        return approved

    def start_attempt(self, round_id: str, at: float, message: str) -> None:
        """Mark the round running, before its process is spawned."""
        with transaction(self.conn):
            self.conn.execute(
                "UPDATE rounds SET status = 'running', started_at = COALESCE(started_at, ?), "
                "attempts = attempts + 1, pid = NULL, pid_started = NULL WHERE round_id = ?",
                (at, round_id),
            )
            self._decide("start", message, at, round_id)

    def set_process(self, round_id: str, pid: int, created: float | None) -> None:
        with transaction(self.conn):
            self.conn.execute(
                "UPDATE rounds SET pid = ?, pid_started = ? WHERE round_id = ?",
                (pid, created, round_id),
            )

    def end_attempt(self, end: AttemptEnd, pacing: PacingState | None, message: str) -> None:
        """Record how an attempt ended; `pacing` (None: unchanged) in the same transaction."""
        done = end.status in ("finished", "refused")
        with transaction(self.conn):
            self.conn.execute(
                "UPDATE rounds SET status = ?, exit_code = ?, outcome = ?, wall_s = wall_s + ?, "
                "finished_at = ? WHERE round_id = ?",
                (
                    end.status,
                    end.exit_code,
                    end.outcome,
                    end.wall_s,
                    end.at if done else None,
                    end.round_id,
                ),
            )
            if pacing is not None:
                self._set_pacing(pacing)
            self._decide(end.status, message, end.at, end.round_id)

    def _set_pacing(self, pacing: PacingState) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('pacing', ?)",
            (pacing.model_dump_json(),),
        )

    def _decide(self, kind: str, message: str, at: float, round_id: str | None) -> None:
        self.conn.execute(
            "INSERT INTO decisions (at, kind, round_id, message) VALUES (?, ?, ?, ?)",
            (at, kind, round_id, message),
        )


@dataclass(frozen=True)
class AttemptEnd:
    round_id: str
    status: RoundStatus
    """`interrupted`, `finished` or `refused`."""
    exit_code: int | None
    """None when the process was not ours to wait for (left by an earlier watcher)."""
    outcome: str | None
    wall_s: float
    at: float


def _round(row: sqlite3.Row) -> RoundRow:
    trigger = RoundTrigger.model_validate(json.loads(row["trigger"]))
    return RoundRow(
        round_id=row["round_id"],
        status=row["status"],
        trigger=trigger,
        trigger_file=Path(row["trigger_file"]),
        created_at=row["created_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        exit_code=row["exit_code"],
        outcome=row["outcome"],
        wall_s=row["wall_s"],
        attempts=row["attempts"],
        pid=row["pid"],
        pid_started=row["pid_started"],
        approved_by=row["approved_by"],
        approved_at=row["approved_at"],
    )
