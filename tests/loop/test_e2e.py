"""The real loop on the embedded default model, through the real CLI (slow; few and real).

One uninterrupted run is the reference; `tuneloop archive reproduce` re-runs its archive and
must get the same numbers and verdict on this machine. A second run is SIGKILLed at phase
boundaries and in the middle of evaluation and training, and resumed after each kill; it must
finish with the same report numbers and verdict, and without redoing phases that had finished.
A third run whose train phase fails stops there with no report, verdict or archive.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from ..installed import tuneloop as installed_tuneloop

ROOT = Path(__file__).resolve().parents[2]
ARITH = ROOT / "examples" / "arith"

pytestmark = pytest.mark.slow

# Small but real: the whole loop on the tiny model, a few training steps.
TRAIN = {"method": "sft", "steps": 6, "batch_size": 16, "learning_rate": 0.003}


def write_config(
    tmp: Path, name: str, tracking: dict[str, str] | None = None, **train: object
) -> Path:
    cfg: dict[str, object] = {
        "name": name,
        "workdir": str(tmp / name / "work"),
        "base_model": str(ARITH / "model"),
        "suite": {"path": str(ARITH / "suite.jsonl")},
        "eval": {"max_tokens": 8},
        "train": {"data": str(ARITH / "train_prompts.jsonl"), **TRAIN, **train},
        "gate": {"min_items": 50, "ledger": str(tmp / name / "ledger.db")},
        "archive": {"root": str(tmp / name / "archive")},
    }
    if tracking is not None:
        cfg["tracking"] = tracking
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def tuneloop(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tuneloop", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=900,
    )


def numbers(work: Path) -> dict[str, object]:
    delta = json.loads((work / "report" / "delta.json").read_text())
    verdict = json.loads((work / "gate" / "verdict.json").read_text())
    keep = ("n_items", "delta", "delta_ci", "p_two_sided", "p_greater", "d_z", "flips")
    return {
        **{k: delta[k] for k in keep},
        "pre": delta["pre"]["mean"],
        "post": delta["post"]["mean"],
        "decision": verdict["decision"],
    }


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("e2e")
    cfg = write_config(tmp, "ref", tracking={"mlflow": "default"})  # MLflow beside the ledger
    done = tuneloop("run", str(cfg))
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return tmp / "ref" / "work"


def test_the_archive_reproduces_identically_beside_it(reference: Path) -> None:
    """Issue 28 item 7: the installed `tuneloop archive reproduce` re-runs the archived round
    into ROOT/reproduce/RUN/ with its own gate ledger, and on this machine every number and the
    verdict are the same to the last digit (exit 0); the original ledger is not touched and
    MLflow is off for the re-run (`test_mlflow_mirrors_the_ledger` finds one model version)."""
    archived = Path(json.loads((reference / "archive" / "archived.json").read_text())["path"])
    ledger = reference.parent / "ledger.db"
    before = ledger.read_bytes()
    ran = installed_tuneloop("archive", "reproduce", archived, timeout=900)
    assert ran.code == 0, ran.output
    assert "same hardware" in ran.stdout, ran.stdout
    assert ran.stdout.rstrip().splitlines()[-1].startswith("identical"), ran.stdout
    again = archived.parent / "reproduce" / archived.name
    assert (again / "ledger.db").is_file() and (again / "work" / "gate" / "verdict.json").is_file()
    assert ledger.read_bytes() == before
    assert not (again / "mlflow.db").exists()  # a check registers no model
    print(ran.stdout)


def test_uninterrupted_run_reports_archives_and_resumes(reference: Path) -> None:
    report = (reference / "capstone" / "report.md").read_text()
    assert "Paired Δ" in report and "## Gate" in report
    archived = json.loads((reference / "archive" / "archived.json").read_text())["path"]
    assert tuneloop("archive", "verify", archived).returncode == 0
    delta = Path(archived) / "run" / "report" / "delta.json"
    original = delta.read_bytes()
    data = bytearray(original)
    data[10] ^= 0x01
    delta.write_bytes(bytes(data))
    bad = tuneloop("archive", "verify", archived)
    delta.write_bytes(original)  # the module's other tests use the archive
    assert bad.returncode == 1 and "run/report/delta.json" in bad.stderr
    records = {p: (reference / p / "phase.json").read_bytes() for p in ("eval_pre", "train")}
    again = tuneloop("run", str(reference.parent.parent / "ref.yaml"))
    assert "eval_pre: skip" in again.stderr
    assert {p: (reference / p / "phase.json").read_bytes() for p in records} == records


def test_mlflow_mirrors_the_ledger(reference: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's round trip: the reference run had `tracking.mlflow: default`; its MLflow
    run, model version and aliases, read back through MlflowClient, match the ledger."""
    import mlflow

    from tuneloop.gate import champion_history
    from tuneloop.records import sha256_path

    rec = json.loads((reference / "track" / "tracking.json").read_text())
    assert rec["status"] == "logged", rec["error"]
    uri = f"sqlite:///{reference.parent}/mlflow.db"  # beside ref's gate ledger
    assert rec["tracking_uri"] == uri
    state = json.loads((reference / "state.json").read_text())
    verdict = json.loads((reference / "gate" / "verdict.json").read_text())
    delta = json.loads((reference / "report" / "delta.json").read_text())
    c = mlflow.MlflowClient(tracking_uri=uri, registry_uri=uri)
    (run,) = c.search_runs([c.get_experiment_by_name("ref").experiment_id])
    assert run.data.tags["tuneloop.run_id"] == state["run_id"]
    assert run.data.tags["tuneloop.verdict"] == verdict["decision"]
    assert run.data.tags["tuneloop.evidence_sha256"] == verdict["evidence_sha256"]
    m = run.data.metrics
    assert (m["pre_mean"], m["post_mean"], m["delta"]) == (
        delta["pre"]["mean"],
        delta["post"]["mean"],
        delta["delta"],
    )
    assert [m["delta_ci_low"], m["delta_ci_high"], m["p_two_sided"]] == [
        *delta["delta_ci"],
        delta["p_two_sided"],
    ]
    assert m["gate.promote"] == float(verdict["decision"] == "promote")
    logged = (reference / "train" / "adapter" / "metrics.jsonl").read_text().splitlines()
    losses = [row["loss"] for row in map(json.loads, logged) if "loss" in row]
    history = sorted(c.get_metric_history(run.info.run_id, "train.loss"), key=lambda x: x.step)
    assert [x.value for x in history] == losses
    p = run.data.params
    assert (p["train.method"], p["train.steps"], p["train.learning_rate"]) == ("sft", "6", "0.003")
    (version,) = c.search_model_versions("name = 'ref'")  # the re-run added none
    assert version.run_id == run.info.run_id
    aliases = {a: int(v) for a, v in c.get_registered_model("ref").aliases.items()}
    champions = champion_history(reference.parent / "ledger.db")
    if verdict["decision"] == "promote":
        assert champions[-1].run_id == state["run_id"]
        assert aliases == {"challenger": int(version.version), "champion": int(version.version)}
    else:
        assert aliases == {"challenger": int(version.version)}
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    served = mlflow.artifacts.download_artifacts("models:/ref@challenger")
    assert sha256_path(Path(served)) == state["phases"]["merge"]["outputs"]["merge/model"]


def _lines(folder: Path, pattern: str) -> int:
    return max((p.read_text().count("\n") for p in folder.glob(pattern)), default=0)


def _run_killed_mid(cfg: Path, folder: Path, pattern: str, min_lines: int) -> None:
    """Start a run and SIGKILL it once a file matching `pattern` has `min_lines` lines."""
    cmd = [sys.executable, "-m", "tuneloop", "run", str(cfg)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        if folder.exists() and _lines(folder, pattern) >= min_lines:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.05)
    assert proc.wait() == -signal.SIGKILL, f"never reached {min_lines} lines of {pattern}"


def test_sigkill_everywhere_then_resume_gives_the_same_numbers(
    reference: Path, tmp_path: Path
) -> None:
    cfg = write_config(tmp_path, "killed")
    work = tmp_path / "killed" / "work"
    finished: dict[str, bytes] = {}

    def check_unchanged() -> None:
        for phase, record in finished.items():
            assert (work / phase / "phase.json").read_bytes() == record, f"{phase} was redone"

    def remember(*phases: str) -> None:
        for p in phases:
            finished[p] = (work / p / "phase.json").read_bytes()

    assert tuneloop("run", str(cfg), env={"TUNELOOP_KILL_AT": "eval_pre:end"}).returncode < 0
    remember("eval_pre")
    _run_killed_mid(cfg, work / "train", "adapter.partial/metrics.jsonl", 2)
    check_unchanged()
    assert tuneloop("run", str(cfg), env={"TUNELOOP_KILL_AT": "merge:end"}).returncode < 0
    remember("train", "merge")
    _run_killed_mid(cfg, work / "eval_post", "samples.jsonl", 100)
    check_unchanged()
    assert tuneloop("run", str(cfg), env={"TUNELOOP_KILL_AT": "report:end"}).returncode < 0
    remember("doctor", "eval_post", "report")
    assert tuneloop("run", str(cfg), env={"TUNELOOP_KILL_AT": "gate:start"}).returncode < 0
    check_unchanged()
    final = tuneloop("run", str(cfg))
    assert final.returncode in (0, 1), final.stderr
    check_unchanged()
    assert numbers(work) == numbers(reference)


def test_failed_train_phase_stops_the_loop(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, "fails", lora={"target_modules": ["no_such_module"]})
    done = tuneloop("run", str(cfg))
    assert done.returncode == 3, done.stdout + done.stderr
    assert "phase 'train' failed" in done.stderr
    work = tmp_path / "fails" / "work"
    state = json.loads((work / "state.json").read_text())
    assert state["phases"]["train"]["status"] == "failed"
    for later in ("merge", "eval_post", "report", "gate", "capstone", "archive"):
        assert not (work / later).exists(), later
    assert not (tmp_path / "fails" / "archive").exists()
