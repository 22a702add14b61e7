"""Every tracking test writes to a real MLflow store under tmp_path, offline: MLflow's usage
telemetry off, and the working directory moved to tmp_path so that no MLflow default
(`./mlflow.db`, `./mlruns`) can land in the repository.

`tracking.mlflow: default` puts the store at `<ledger folder>/mlflow.db`; each test gets there
a copy of one store MLflow created for the session, because creating one (its ~50 schema
migrations) takes 4–10 s on a busy machine and is the same for every test. The copy is a real
MLflow database; `test_uri.py` and the failure test cover a store created from nothing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _offline_mlflow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="session")
def migrated_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty MLflow SQLite store, created once by MLflow itself."""
    from tuneloop.tracking import import_mlflow

    db = tmp_path_factory.mktemp("mlflow") / "mlflow.db"
    import_mlflow().MlflowClient(tracking_uri=f"sqlite:///{db}").search_experiments()
    return db


@pytest.fixture
def store(tmp_path: Path, migrated_store: Path) -> Path:
    """`<tmp>/ledger/mlflow.db`, where `tracking.mlflow: default` finds it (fakeloop's ledger)."""
    db = tmp_path / "ledger" / "mlflow.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(migrated_store, db)
    return db
