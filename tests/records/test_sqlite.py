"""One way to open tuneloop's SQLite files: WAL, versions, upgrades, errors naming the file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tuneloop.errors import InputError
from tuneloop.records import SqliteFile, open_sqlite, transaction

SPEC = SqliteFile(
    schema="CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS t (x INTEGER);",
    version=2,
    what="test file",
    unreadable="not a test file ({err})",
    newer="test file version {found} is newer than {version}",
)


def version(conn: sqlite3.Connection) -> str:
    return conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]


def test_a_new_file_gets_its_schema_wal_and_version(tmp_path: Path) -> None:
    conn = open_sqlite(tmp_path / "sub" / "f.db", SPEC)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert version(conn) == "2"
        assert conn.execute("SELECT COUNT(*) FROM t").fetchone()["COUNT(*)"] == 0  # sqlite3.Row
    finally:
        conn.close()


def test_an_older_file_is_upgraded_a_current_one_left_alone(tmp_path: Path) -> None:
    calls: list[int] = []

    def upgrade(conn: sqlite3.Connection) -> None:
        calls.append(1)
        conn.execute("CREATE TABLE IF NOT EXISTS added (y INTEGER)")

    spec = SqliteFile(**{**vars(SPEC), "upgrade": upgrade})
    path = tmp_path / "f.db"
    con = sqlite3.connect(path)
    con.executescript(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "INSERT INTO meta VALUES ('schema_version', '1');"
    )
    con.close()
    open_sqlite(path, spec).close()
    assert calls == [1]
    conn = open_sqlite(path, spec)
    assert version(conn) == "2" and calls == [1]  # current: not upgraded again
    conn.execute("SELECT * FROM added")
    conn.close()


def test_transactions_commit_or_roll_back(tmp_path: Path) -> None:
    conn = open_sqlite(tmp_path / "f.db", SPEC)
    with transaction(conn):
        conn.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(RuntimeError), transaction(conn):
        conn.execute("INSERT INTO t VALUES (2)")
        raise RuntimeError("crash")
    assert [r[0] for r in conn.execute("SELECT x FROM t")] == [1]
    conn.close()


def test_errors_name_the_file_and_leave_it_untouched(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"no database" * 100)
    with pytest.raises(InputError, match=r"bad\.db: not a test file \(file is not a database\)"):
        open_sqlite(bad, SPEC)
    assert bad.read_bytes() == b"no database" * 100
    newer = tmp_path / "newer.db"
    open_sqlite(newer, SPEC).close()
    con = sqlite3.connect(newer)
    con.execute("UPDATE meta SET value = '5'")
    con.commit()
    con.close()
    with pytest.raises(InputError, match=r"newer\.db: test file version 5 is newer than 2"):
        open_sqlite(newer, SPEC)
    (tmp_path / "folder.db").mkdir()
    with pytest.raises(InputError, match=r"folder\.db: "):
        open_sqlite(tmp_path / "folder.db", SPEC)
