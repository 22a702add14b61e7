"""`tracking.mlflow` before any compute: the default store's place, the URIs MLflow 3 takes,
and `tuneloop check` (the installed script) naming the key and line of a bad one."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from tests.modelfiles import write_model_files
from tuneloop.config.tracking import TrackingConfig
from tuneloop.tracking import EXTRA, artifact_location, check_uri, log_round, resolve_uri
from tuneloop.tracking.facts import RoundFacts

from ..loop.preflight.test_checks import GOOD, line_of

TUNELOOP = Path(sys.executable).parent / "tuneloop"


def test_default_is_a_sqlite_store_in_the_given_folder(tmp_path: Path) -> None:
    assert TrackingConfig(mlflow=" Default ").mlflow == "default"
    uri = resolve_uri("default", tmp_path)
    assert uri == f"sqlite:///{tmp_path}/mlflow.db"
    assert artifact_location(uri) == (tmp_path / "mlartifacts").as_uri()
    assert artifact_location("http://127.0.0.1:5000") is None  # the server decides
    assert resolve_uri("http://127.0.0.1:5000", tmp_path) == "http://127.0.0.1:5000"


@pytest.mark.parametrize(
    ("uri", "words"),
    [
        ("mlruns", "not a tracking URI MLflow knows"),
        ("sqlit:///x.db", "not a tracking URI MLflow knows"),
        ("file:///tmp/mlruns", "MLFLOW_ALLOW_FILE_STORE=true"),
    ],
)
def test_uris_mlflow_3_refuses_are_errors(
    uri: str, words: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    errors, warnings = check_uri(uri, tmp_path)
    assert len(errors) == 1 and words in errors[0] and warnings == []


def test_an_unwritable_store_is_a_warning_not_a_refusal(tmp_path: Path) -> None:
    (tmp_path / "blocked").write_text("")
    errors, warnings = check_uri(f"sqlite:///{tmp_path}/blocked/db/mlflow.db", tmp_path)
    assert errors == [] and len(warnings) == 1
    assert f"{tmp_path}/blocked is a file" in warnings[0] and "retries it" in warnings[0]
    assert check_uri("default", tmp_path / "not" / "yet") == ([], [])  # created on first write


def test_a_missing_client_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mlflow", None)  # what `import mlflow` sees uninstalled
    errors, _ = check_uri("default", tmp_path)
    assert errors == [f"needs the MLflow client, which is not installed: {EXTRA}"]
    facts = RoundFacts(run_id="r", experiment="e", registered_model="m", candidate_at="t")
    rec = log_round(resolve_uri("default", tmp_path), facts, log_model=False)
    assert rec.status == "failed" and EXTRA in (rec.error or "")
    assert not (tmp_path / "mlflow.db").exists()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """GOOD from tests/loop/preflight/test_checks.py, with its model, suite and train data."""
    import json

    (tmp_path / "model").mkdir()
    write_model_files(tmp_path / "model")
    items = [{"id": f"q{i}", "prompt": f"{i}+1=", "answer": str(i + 1)} for i in range(200)]
    (tmp_path / "suite.jsonl").write_text("".join(json.dumps(x) + "\n" for x in items))
    (tmp_path / "train.jsonl").write_text('{"prompt": "1+1=", "answer": "2"}\n')
    return tmp_path


def check(project: Path, tracking: str) -> tuple[subprocess.CompletedProcess[str], str]:
    text = GOOD + tracking
    (project / "loop.yaml").write_text(text)
    done = subprocess.run(
        [str(TUNELOOP), "check", str(project / "loop.yaml")], capture_output=True, text=True
    )
    return done, text


def test_check_names_the_key_and_line_of_a_bad_store(project: Path) -> None:
    done, text = check(project, "tracking:\n  mlflow: file:///tmp/mlruns\n")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    line = line_of(text, "  mlflow:")
    assert f"tracking.mlflow (line {line}): 'file:///tmp/mlruns' is a file store" in done.stderr
    assert not (project / "work").exists()
    done, _ = check(project, "tracking:\n  mlflow: ''\n")
    assert done.returncode == 2 and "tracking.mlflow" in done.stderr
    assert "expected a tracking URI or `default`" in done.stderr


def test_check_accepts_the_default_store_and_prints_it(project: Path) -> None:
    done, _ = check(project, "tracking:\n  mlflow: default\n  registered_model: arith\n")
    assert done.returncode == 0, done.stderr
    assert "mlflow: default" in done.stdout and "registered_model: arith" in done.stdout
    assert not (project / "archive").exists()  # nothing written, no store created


def test_databricks_is_accepted_as_the_message_says(project: Path) -> None:
    """Issue 25 item 15: `databricks` was listed as known and refused."""
    for uri in ("databricks", "databricks://prod"):
        done, _ = check(project, f"tracking:\n  mlflow: {uri}\n")
        assert done.returncode == 0, done.stderr
    assert check_uri("databricks", project) == ([], [])


def test_a_missing_database_driver_names_what_to_install(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 25 item 15: a postgresql:// store with no psycopg2 passed check and failed at
    the write; check names the package, and shows the URI with its password masked."""
    monkeypatch.setitem(sys.modules, "psycopg2", None)
    errors, _ = check_uri("postgresql://u:pw123@db.internal/mlflow", project)
    assert errors == [
        "'postgresql://u:<SECRET>@db.internal/mlflow' is a postgresql store, whose database "
        "driver is not installed: pip install psycopg2-binary (or name an installed driver in "
        "the scheme, e.g. postgresql+DRIVER://)"
    ]
    monkeypatch.setitem(sys.modules, "pymysql", None)
    (error,) = check_uri("mysql+pymysql://u@db/m", project)[0]
    assert "pip install PyMySQL" in error
    done, text = check(project, "tracking:\n  mlflow: mssql+pymssql://u:pw123@db/m\n")
    if importlib.util.find_spec("pymssql") is None:
        assert done.returncode == 2 and "Traceback" not in done.stderr
        line = line_of(text, "  mlflow:")
        assert f"tracking.mlflow (line {line}):" in done.stderr
        assert "pip install pymssql" in done.stderr
    assert "pw123" not in done.stdout + done.stderr


def test_a_relative_sqlite_store_is_warned_about(project: Path) -> None:
    """`sqlite:///mlflow.db` is opened in the folder `run` starts in, not beside loop.yaml:
    two runs from two folders would write two stores. A warning, naming the fix."""
    done, text = check(project, "tracking:\n  mlflow: sqlite:///mlflow.db\n")
    assert done.returncode == 0, done.stderr
    line = line_of(text, "  mlflow:")
    assert f"warning: tracking.mlflow (line {line}): 'sqlite:///mlflow.db' is a relative" in (
        done.stderr
    )
    assert "sqlite:////abs/path/mlflow.db" in done.stderr
    assert check_uri(f"sqlite:///{project}/mlflow.db", project) == ([], [])
