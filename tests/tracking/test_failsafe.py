"""A failed MLflow write never fails the round, says so, and the next run retries it in place.

The store is `sqlite:///<tmp>/blocked/mlflow.db` where `blocked` is a file, so MLflow cannot
create its database (what a wrong path, a read-only volume or a locked store looks like to
the loop). Real MLflow, real runner on the fake-model phase table (tests/loop/fakeloop.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tuneloop.gate import champion_history
from tuneloop.loop.summary import print_outcome
from tuneloop.records import read_record
from tuneloop.tracking import TrackingRecord

from ..loop.fakeloop import runner, write_config


def tracked(tmp: Path) -> TrackingRecord:
    return read_record(tmp / "work" / "track" / "tracking.json", TrackingRecord)


def test_a_failed_write_finishes_the_run_warns_and_is_retried_in_place(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the store's folder should be\n")
    uri = f"sqlite:///{blocked}/mlflow.db"
    first = runner(write_config(tmp_path, tracking={"mlflow": uri}))
    state = first.run()
    # the round ended as if tracking were off: promoted, the ledger names it champion
    assert all(rec.status in ("done", "skipped") for rec in state.phases.values())
    ledger = tmp_path / "ledger" / "ledger.db"
    assert [h.run_id for h in champion_history(ledger)] == [state.run_id]
    rec = tracked(tmp_path)
    assert rec.status == "failed" and rec.mlflow_run_id is None and rec.attempts == 1
    assert str(blocked) in (rec.error or "")
    err = capfd.readouterr().err
    assert f"warning: tracking: the MLflow write to {uri} failed" in err
    assert "the ledger stays the source of truth" in err and "retried by the next" in err
    assert print_outcome(first.cfg, state, 1.0, 1.0) == 0  # promoted: tracking changes nothing
    assert "mlflow: not written (attempt 1;" in capfd.readouterr().out

    config = tmp_path / "loop.yaml"
    again = runner(config)
    again.code = first.code  # other sessions edit src/ live; a code change is another test
    plan = {line.phase: line for line in again.plan()}
    assert plan["track"].action == "run" and "last MLflow write failed" in plan["track"].reason
    off = {"data", "replay", "challengers", "eval_warmup", "compose"}  # not configured here
    assert {p for p, line in plan.items() if line.action != "skip"} <= {"track", *off}
    blocked.unlink()  # the store can be created now
    retried = again.run()
    assert retried.run_id == state.run_id and retried.previous_runs == []  # not a new round
    rec = tracked(tmp_path)
    assert rec.status == "logged" and rec.attempts == 2 and rec.error is None
    assert (rec.model_version, rec.aliases) == (1, ["challenger", "champion"])
    assert (blocked / "mlflow.db").is_file() and (blocked / "mlartifacts").is_dir()
    print_outcome(again.cfg, retried, 1.0, 1.0)
    assert (
        f"mlflow: run {rec.mlflow_run_id}, fake v1 @challenger @champion" in capfd.readouterr().out
    )


def test_new_tracking_settings_write_again_in_the_same_round(tmp_path: Path, store: Path) -> None:
    config = write_config(tmp_path, tracking={"mlflow": "default"})
    first = runner(config)
    state = first.run()
    assert tracked(tmp_path).registered_model == "fake"
    again = runner(config, ["tracking.registered_model=arith-tuner"])
    again.code = first.code
    plan = {line.phase: line for line in again.plan()}
    assert plan["track"].action == "run" and "tracking settings changed" in plan["track"].reason
    assert again.run().run_id == state.run_id
    rec = tracked(tmp_path)
    assert (rec.registered_model, rec.model_version, rec.attempts) == ("arith-tuner", 1, 2)
    import mlflow

    c = mlflow.MlflowClient(tracking_uri=rec.tracking_uri, registry_uri=rec.tracking_uri)
    runs = c.search_runs([c.get_experiment_by_name("fake").experiment_id])
    assert [r.info.run_id for r in runs] == [rec.mlflow_run_id]  # the same MLflow run
    assert {m.name for m in c.search_registered_models()} == {"fake", "arith-tuner"}
