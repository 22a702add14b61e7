"""`tracking.mlflow` with a password in it: used to connect, never written or printed.

Issue 25 item 6: `postgresql://user:pw@host/db` was printed in the track warning and written to
tracking.json, report.html, the manifest and the archived config. `masked_uri` is the one
function that masks it, applied where the URI enters a record.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tuneloop.config.tracking import TrackingConfig, masked_uri

from ..installed import tuneloop
from ..test_archive import _fake_round

PASSWORD = "hunter2pw"
TOKEN = "t0kenValue42"
URI = f"postgresql://tl:{PASSWORD}@127.0.0.1:9/db?sslmode=disable&token={TOKEN}"


def test_masked_uri_masks_the_password_and_query_tokens_only() -> None:
    shown = masked_uri(URI)
    assert PASSWORD not in shown and TOKEN not in shown
    assert shown.startswith("postgresql://tl:") and "@127.0.0.1:9/db?sslmode=disable" in shown
    assert masked_uri("sqlite:////srv/mlflow.db") == "sqlite:////srv/mlflow.db"
    assert masked_uri("databricks://prod") == "databricks://prod"
    # a driver's message that quotes the password alone is masked too, given the URI
    assert PASSWORD not in masked_uri(f"auth failed for password {PASSWORD}", URI)
    cfg = TrackingConfig(mlflow=URI)
    assert cfg.mlflow == URI  # what connects
    assert PASSWORD not in str(cfg.model_dump(mode="json"))  # what every record holds


def test_no_file_of_the_run_or_archive_and_no_output_holds_the_password(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    archive = _fake_round(tmp_path, tracking={"mlflow": URI, "log_model": False})
    printed = capfd.readouterr()
    config = tmp_path / "loop.yaml"
    leaks = [
        str(p)
        for p in tmp_path.rglob("*")
        if p.is_file() and p != config and PASSWORD.encode() in p.read_bytes()
    ]
    assert leaks == []
    assert (tmp_path / "work" / "track" / "tracking.json").is_file()  # the phase ran
    assert PASSWORD not in printed.out + printed.err
    for path in (config, archive / "inputs" / "loop.yaml"):
        ran = tuneloop("check", path, cwd=tmp_path)
        assert PASSWORD not in ran.output and TOKEN not in ran.output
        assert "Traceback" not in ran.output
