"""The judge's memory: every judgement by the hash of the request that asked for it.

    cache = JudgeCache(Path("judge.yaml.cache.sqlite"))
    hit = cache.get(request_hash)          # CachedCall | None
    cache.put(request_hash, call)

A rerun of an eval, a resumed eval after `kill -9`, or the second arm judged with the same
rubric asks the judge nothing it was already asked: the key is the sha256 of the request
body (endpoint, model, rendered rubric, sampling, seed), so a changed rubric, judge or
setting is a new key and never a stale answer. Only parsed judgements are stored (an
unparsable answer is asked again with a new seed, and the new request is its own key).
SQLite through `records.sqlite` (WAL, synchronous=FULL, one committed row per judgement), one
connection per thread: scorers run in the eval's worker threads.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path

from tuneloop.records.sqlite import SqliteFile, open_sqlite, transaction

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS judgements (
    request_hash TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
"""
CACHE_FILE = SqliteFile(
    schema=_SCHEMA,
    version=1,
    what="judge cache",
    unreadable="not a judge cache ({err}); move it aside or name another `cache:`",
    newer="judge cache of schema {found}, newer than this tuneloop's {version}; upgrade tuneloop",
)


@dataclass(frozen=True)
class CachedCall:
    text: str
    """The judgement as the judge wrote it."""
    prompt_tokens: int | None
    completion_tokens: int | None


class JudgeCache:
    """Judgements by request hash; safe to share between threads."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._local = threading.local()
        self._conn()  # open once here: a bad file fails at load, not in a worker thread

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = open_sqlite(self.path, CACHE_FILE)
        return conn

    def get(self, request_hash: str) -> CachedCall | None:
        query = (
            "SELECT text, prompt_tokens, completion_tokens FROM judgements WHERE request_hash = ?"
        )
        row = self._conn().execute(query, (request_hash,)).fetchone()
        if row is None:
            return None
        return CachedCall(row["text"], row["prompt_tokens"], row["completion_tokens"])

    def put(self, request_hash: str, call: CachedCall) -> None:
        with transaction(self._conn()) as conn:
            conn.execute(
                "INSERT OR IGNORE INTO judgements (request_hash, text, prompt_tokens, "
                "completion_tokens) VALUES (?, ?, ?, ?)",
                (request_hash, call.text, call.prompt_tokens, call.completion_tokens),
            )

    def __len__(self) -> int:
        return int(self._conn().execute("SELECT COUNT(*) FROM judgements").fetchone()[0])
