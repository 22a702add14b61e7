"""Where the MLflow store is, and what can be said about it before any compute (no mlflow import).

`resolve_uri("default", folder)` is `sqlite:///<folder>/mlflow.db`: MLflow 3's recommended
local store (its own default is `sqlite:///mlflow.db` in the working directory, which would
scatter stores wherever `tuneloop run` was started). The loop passes the gate ledger's folder,
so every round of a flywheel shares one registry. A SQLite store's artifacts go beside its
database (`mlartifacts/`), not into MLflow's default `./mlruns` of the current directory.

`check_uri` is what `tuneloop check` reports: an error when the MLflow client is missing (it
names `pip install 'tuneloop[mlflow]'`), when the URI's scheme is not a store MLflow knows,
when a database store's driver is not installed (it names the package to install: psycopg2
for `postgresql://`, mysqlclient for `mysql://`, …), or when it is a file store, which MLflow
3 refuses (maintenance mode) unless `MLFLOW_ALLOW_FILE_STORE=true`; a warning when a local
SQLite store's folder cannot be created or written — the run would still finish (a failed
write is recorded and retried), so that is not a reason to refuse it; a warning too for a
relative `sqlite:///x.db`, which MLflow opens in the current folder, not beside loop.yaml.
`databricks` (the default profile) and `databricks://PROFILE` are Databricks workspaces, as
MLflow spells them. Every message shows the URI masked (`config.tracking.masked_uri`).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from urllib.parse import urlparse

from tuneloop.config.tracking import DEFAULT_STORE, masked_uri
from tuneloop.errors import InputError

EXTRA = "pip install 'tuneloop[mlflow]'"
SCHEMES = ("sqlite", "postgresql", "mysql", "mssql", "http", "https", "databricks", "file")
"""Tracking stores MLflow 3 knows (a database dialect may name its driver: `mysql+pymysql`;
`databricks` alone is the default Databricks profile)."""

DRIVERS: dict[tuple[str, str], tuple[str, str]] = {
    ("postgresql", ""): ("psycopg2", "psycopg2-binary"),
    ("postgresql", "psycopg2"): ("psycopg2", "psycopg2-binary"),
    ("postgresql", "psycopg"): ("psycopg", "'psycopg[binary]'"),
    ("postgresql", "pg8000"): ("pg8000", "pg8000"),
    ("mysql", ""): ("MySQLdb", "mysqlclient"),
    ("mysql", "mysqldb"): ("MySQLdb", "mysqlclient"),
    ("mysql", "pymysql"): ("pymysql", "PyMySQL"),
    ("mssql", ""): ("pyodbc", "pyodbc"),
    ("mssql", "pyodbc"): ("pyodbc", "pyodbc"),
    ("mssql", "pymssql"): ("pymssql", "pymssql"),
}
"""(dialect, driver) of a database store → (module SQLAlchemy imports, `pip install` name):
the DBAPI SQLAlchemy picks when the URI names none (`postgresql://` is psycopg2's), else
the one named (`postgresql+psycopg://`). A driver not listed is left to MLflow."""


def require_mlflow() -> None:
    """Raise InputError naming the extra when the MLflow client is not installed."""
    if importlib.util.find_spec("mlflow") is None:
        raise InputError(
            f"tracking.mlflow needs the MLflow client, which is not installed: {EXTRA}"
        )


def resolve_uri(setting: str, default_folder: Path) -> str:
    """The tracking URI of `tracking.mlflow` (`default`: a SQLite store in `default_folder`)."""
    if setting == DEFAULT_STORE:
        return f"sqlite:///{(default_folder / 'mlflow.db').absolute()}"
    return setting


def sqlite_path(uri: str) -> Path | None:
    """The database file of a local `sqlite:///` URI (None for anything else)."""
    if not uri.startswith("sqlite:///") or uri == "sqlite:///:memory:":
        return None
    return Path(uri.removeprefix("sqlite:///"))


def artifact_location(uri: str) -> str | None:
    """Where a new experiment keeps its artifacts: beside a SQLite database; else the
    store's own default (a tracking server decides for itself)."""
    db = sqlite_path(uri)
    return (db.parent.absolute() / "mlartifacts").as_uri() if db is not None else None


def scheme(uri: str) -> str:
    if uri.strip().lower() == "databricks":
        return "databricks"
    return urlparse(uri).scheme.split("+", 1)[0].lower()


def missing_driver(uri: str) -> str | None:
    """`pip install …` for a database store whose driver is not installed, else None."""
    dialect, _, driver = urlparse(uri).scheme.lower().partition("+")
    known = DRIVERS.get((dialect, driver))
    if known is None:
        return None
    module, package = known
    return None if importlib.util.find_spec(module) is not None else f"pip install {package}"


def check_uri(setting: str, default_folder: Path) -> tuple[list[str], list[str]]:
    """(errors, warnings) about `tracking.mlflow`, in words, without the key."""
    errors: list[str] = []
    try:
        require_mlflow()
    except InputError as err:
        errors.append(str(err).removeprefix("tracking.mlflow "))
    uri = resolve_uri(setting, default_folder)
    kind, shown = scheme(uri), masked_uri(uri)
    install = missing_driver(uri) if kind in SCHEMES else None
    if kind not in SCHEMES:
        errors.append(
            f"{shown!r} is not a tracking URI MLflow knows (schemes: {', '.join(SCHEMES)}); "
            "write `default` for a local SQLite store, or sqlite:////abs/path/mlflow.db"
        )
    elif install is not None:
        errors.append(
            f"{shown!r} is a {kind} store, whose database driver is not installed: {install} "
            f"(or name an installed driver in the scheme, e.g. {kind}+DRIVER://)"
        )
    elif kind == "file" and os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() != "true":
        errors.append(
            f"{shown!r} is a file store, which MLflow 3 refuses (maintenance mode) unless "
            "MLFLOW_ALLOW_FILE_STORE=true; use `default` or sqlite:////abs/path/mlflow.db"
        )
    db = sqlite_path(uri)
    problem = _unwritable(db.parent) if db is not None else None
    warnings = [] if problem is None else [_warning(problem)]
    if db is not None and not db.is_absolute():
        warnings.append(
            f"{shown!r} is a relative path: MLflow opens it in the folder `tuneloop run` is "
            "started from, not beside loop.yaml (each working folder would get its own "
            "store); write sqlite:////abs/path/mlflow.db, or `default` (beside the ledger)"
        )
    return errors, warnings


def _warning(problem: str) -> str:
    return (
        f"{problem}: the MLflow write will fail; the run still finishes (the ledger is the "
        "source of truth), records the failure in track/tracking.json and retries it next run"
    )


def _unwritable(folder: Path) -> str | None:
    """Why `folder` cannot be created or written, or None."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is a file, so {folder} cannot be created"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} is not writable"
    return None
