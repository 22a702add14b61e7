"""A round mirrored into a real MLflow SQLite store and read back through `MlflowClient`.

The fake-model phase table (tests/loop/fakeloop.py: no server, no torch) with the real
report, gate, capstone, archive, promote and track phases, so every figure MLflow holds can be
checked against the round's own records and the ledger. No mocks: MLflow 3 writes to
`<tmp>/ledger/mlflow.db` (`tracking.mlflow: default`) as it would for a user.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tuneloop.gate import champion_history
from tuneloop.gate.verdict_record import GateVerdict
from tuneloop.loop.state import RunState
from tuneloop.loop.track_facts import round_facts
from tuneloop.records import read_record, sha256_path
from tuneloop.report.record import DeltaReport
from tuneloop.tracking import TrackingRecord, log_round

from ..loop import fakeloop
from ..loop.fakeloop import runner, write_config

RUN_FILES = {
    "report/delta.json",
    "report/delta.md",
    "gate/verdict.json",
    "capstone/report.md",
    "capstone/report.html",
    "promote/promotion.json",
    "archive/archived.json",
    "archive/manifest.json",
    "state.json",
    "model/config.json",
    "model/weights.bin",
    "model/tokenizer.json",
    "model/tokenizer_config.json",
    "model/chat_template.jinja",
}


@pytest.fixture(autouse=True)
def _calls() -> None:
    fakeloop.CALLS.clear()


def client(uri: str) -> Any:
    import mlflow

    return mlflow.MlflowClient(tracking_uri=uri, registry_uri=uri)


def tracked(work: Path) -> TrackingRecord:
    return read_record(work / "track" / "tracking.json", TrackingRecord)


def aliases(c: Any, name: str = "fake") -> dict[str, int]:
    return {a: int(v) for a, v in c.get_registered_model(name).aliases.items()}


def artifact_files(c: Any, run_id: str, path: str | None = None) -> set[str]:
    out: set[str] = set()
    for info in c.list_artifacts(run_id, path):
        out |= artifact_files(c, run_id, info.path) if info.is_dir else {info.path}
    return out


def test_a_round_is_logged_and_reads_back_as_its_records(
    tmp_path: Path, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = runner(write_config(tmp_path, tracking={"mlflow": "default"})).run()
    work = tmp_path / "work"
    rec = tracked(work)
    assert rec.status == "logged", rec.error
    assert rec.tracking_uri == f"sqlite:///{tmp_path}/ledger/mlflow.db"  # beside the ledger
    c = client(rec.tracking_uri)
    exp = c.get_experiment_by_name("fake")  # named after the loop
    assert exp.artifact_location == (tmp_path / "ledger" / "mlartifacts").as_uri()
    (run,) = c.search_runs([exp.experiment_id])
    assert run.info.run_id == rec.mlflow_run_id and run.info.status == "FINISHED"

    delta = read_record(work / "report" / "delta.json", DeltaReport)
    verdict = read_record(work / "gate" / "verdict.json", GateVerdict)
    m = run.data.metrics
    assert (m["pre_mean"], m["post_mean"], m["delta"]) == (
        delta.pre.mean,
        delta.post.mean,
        delta.delta,
    )
    assert (m["delta_ci_low"], m["delta_ci_high"]) == tuple(delta.delta_ci)
    assert m["p_two_sided"] == delta.p_two_sided and m["gate.p_value"] == verdict.stats["p_value"]
    assert m["gate.delta"] == verdict.stats["delta"] and m["gate.promote"] == 1.0
    assert m["time.gate_s"] == state.phases["gate"].duration_s
    p = run.data.params
    assert (p["train.method"], p["train.steps"], p["train.lora.r"]) == ("sft", "100", "16")
    assert p["suite.revision"] == delta.suite_revision and p["gate.slice"] == "gate"
    assert p["merged_model_sha256"] == state.phases["merge"].outputs["merge/model"]
    t = run.data.tags
    assert t["tuneloop.run_id"] == state.run_id and t["tuneloop.verdict"] == "promote"
    assert t["tuneloop.evidence_sha256"] == verdict.evidence_sha256
    assert artifact_files(c, run.info.run_id) == RUN_FILES

    (version,) = c.search_model_versions("name = 'fake'")
    assert (int(version.version), version.run_id) == (1, run.info.run_id)
    assert version.tags["tuneloop.run_id"] == state.run_id
    assert aliases(c) == {"champion": 1, "challenger": 1}
    assert (rec.model_version, rec.champion_version) == (1, 1)
    assert rec.aliases == ["challenger", "champion"]
    # what serving code loads is the merged model, byte for byte
    monkeypatch.setenv("MLFLOW_TRACKING_URI", rec.tracking_uri)
    import mlflow

    served = Path(mlflow.artifacts.download_artifacts("models:/fake@champion"))
    assert sha256_path(served) == sha256_path(work / "merge" / "model")
    assert champion_history(tmp_path / "ledger" / "ledger.db")[-1].run_id == state.run_id


def test_a_rejected_candidate_takes_challenger_and_leaves_champion(
    tmp_path: Path, store: Path
) -> None:
    config = write_config(tmp_path, tracking={"mlflow": "default"})
    first = runner(config).run()
    second = runner(
        config, ["train.steps=3", "gate.allow_slice_reuse=true"], from_phase="train"
    ).run()
    rec = tracked(tmp_path / "work")
    assert rec.status == "logged" and rec.run_id == second.run_id != first.run_id
    c = client(rec.tracking_uri)
    assert aliases(c) == {"champion": 1, "challenger": 2}
    v1, v2 = (c.get_model_version("fake", v) for v in ("1", "2"))
    assert v1.tags["tuneloop.run_id"] == first.run_id and v1.tags["tuneloop.verdict"] == "promote"
    assert v2.tags["tuneloop.run_id"] == second.run_id and v2.tags["tuneloop.verdict"] == "reject"
    assert (rec.model_version, rec.aliases, rec.champion_version) == (2, ["challenger"], 1)
    runs = c.search_runs([c.get_experiment_by_name("fake").experiment_id])
    assert sorted(r.data.tags["tuneloop.verdict"] for r in runs) == ["promote", "reject"]
    assert c.get_run(v2.run_id).data.metrics["gate.promote"] == 0.0
    # the ledger agrees: its champion is still the first round's
    assert [h.run_id for h in champion_history(tmp_path / "ledger" / "ledger.db")] == [first.run_id]


def test_writing_a_round_again_adds_no_run_version_or_metric_point(
    tmp_path: Path, store: Path
) -> None:
    config = write_config(tmp_path, tracking={"mlflow": "default"})
    first = runner(config)
    state: RunState = first.run()
    work = tmp_path / "work"
    rec = tracked(work)
    cfg = first.cfg
    again = log_round(
        rec.tracking_uri, round_facts(cfg, work, state.run_id), log_model=True, attempts=2
    )
    assert again.status == "logged", again.error
    assert (again.mlflow_run_id, again.model_version) == (rec.mlflow_run_id, 1)
    c = client(rec.tracking_uri)
    assert len(c.search_runs([c.get_experiment_by_name("fake").experiment_id])) == 1
    assert len(c.search_model_versions("name = 'fake'")) == 1
    assert len(c.get_metric_history(rec.mlflow_run_id, "delta")) == 1
    # a plain re-run skips the phase and writes nothing (same code: others edit src/ live)
    fakeloop.CALLS.clear()
    plain = runner(config)
    plain.code = first.code
    plain.run()
    assert fakeloop.CALLS == [] and tracked(work) == rec


def test_flywheel_rounds_share_one_experiment_and_one_registered_model(
    tmp_path: Path, store: Path
) -> None:
    from ..loop.rounds.test_driver import flywheel_config

    config = flywheel_config(tmp_path)
    config.write_text(config.read_text() + "tracking:\n  mlflow: default\n")
    assert fakeloop.run_round(config) == 0  # r0001 promoted
    assert fakeloop.run_round(config, ["train.steps=1"]) == 1  # r0002 rejected
    uri = f"sqlite:///{store}"
    c = client(uri)
    runs = c.search_runs([c.get_experiment_by_name("fake").experiment_id])  # no -rNNNN
    rounds = {r.data.tags["tuneloop.round_id"]: r.data.tags["tuneloop.verdict"] for r in runs}
    assert rounds == {"r0001": "promote", "r0002": "reject"}
    assert aliases(c) == {"champion": 1, "challenger": 2}
    champion = c.get_model_version_by_alias("fake", "champion")
    history = champion_history(tmp_path / "ledger" / "ledger.db")
    assert champion.tags["tuneloop.run_id"] == history[-1].run_id  # the ledger's champion


def test_an_approval_in_the_ledger_moves_champion_on_the_next_run(
    tmp_path: Path, store: Path
) -> None:
    from tuneloop.gate.promotion import approve

    config = write_config(tmp_path, tracking={"mlflow": "default"}, gate={"require_approval": True})
    first = runner(config)
    state = first.run()
    c = client(f"sqlite:///{store}")
    assert aliases(c) == {"challenger": 1}  # awaiting approval: not the champion yet
    approve(state.run_id, tmp_path / "ledger" / "ledger.db")
    again = runner(config)
    again.code = first.code  # others edit src/ live
    (track,) = [line for line in again.plan() if line.phase == "track"]
    assert track.action == "run" and "the ledger's champion changed" in track.reason
    again.run()
    assert aliases(c) == {"challenger": 1, "champion": 1}
    assert tracked(tmp_path / "work").champion_version == 1
