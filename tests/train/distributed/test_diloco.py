"""DiLoCo across real processes: torchft's lighthouse, two replica processes, gloo on CPU.

No mocks: the lighthouse is the wheel's `torchft_lighthouse`, each replica is its own
process with a torchft Manager, and recovery goes through torchft's checkpoint transport.
The multi-process tests run on the tiny random model and take ~30-70 s each on 2 cores.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import arith_rows, write_jsonl

from tuneloop.errors import InputError, PhaseFailed
from tuneloop.records import read_jsonl, read_record
from tuneloop.train.distributed.diloco import (
    DilocoRunRecord,
    ReplicaSummary,
    check_diloco,
    run_diloco,
)
from tuneloop.train.distributed.plain_ddp import run_ddp
from tuneloop.train.distributed.plain_sft import batch_indices
from tuneloop.train.settings import TrainSettings

pytest.importorskip("torchft")

_BESIDE = Path(sys.executable).with_name("tuneloop")
TUNELOOP = str(_BESIDE) if _BESIDE.is_file() else shutil.which("tuneloop")


def diloco_settings(**update: object) -> TrainSettings:
    base = {
        "method": "sft",
        "steps": 40,
        "batch_size": 8,
        "learning_rate": 3e-3,
        "torch_threads": 1,
        "lora": {"r": 8, "alpha": 16},
        "diloco": {"replicas": 2, "inner_steps": 5},
    }
    return TrainSettings.model_validate({**base, **update})


def test_batch_indices_split_each_global_batch_and_cover_each_epoch() -> None:
    n, batch = 10, 4
    steps = [batch_indices(n, g, batch, 0, 1, seed=3) for g in range(5)]
    flat = [i for s in steps for i in s]
    assert sorted(flat[:10]) == list(range(10)) and sorted(flat[10:20]) == list(range(10))
    for g in range(5):
        halves = batch_indices(n, g, batch, 0, 2, 3) + batch_indices(n, g, batch, 1, 2, 3)
        assert halves == steps[g]


def test_check_diloco_names_the_key() -> None:
    with pytest.raises(InputError, match="train.method"):
        check_diloco(diloco_settings(method="grpo"))
    with pytest.raises(InputError, match=r"train.steps: 42 is not a multiple.*inner_steps \(5\)"):
        check_diloco(diloco_settings(steps=42))
    with pytest.raises(InputError, match=r"batch_size: 7 .*replicas \(2\)"):
        check_diloco(diloco_settings(batch_size=7))
    with pytest.raises(InputError, match="train.nproc"):
        check_diloco(diloco_settings(nproc=2))


@pytest.fixture
def sft_rows(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "rows.jsonl", arith_rows(64))


def test_diloco_matches_ddp_loss_with_h_times_fewer_bytes(
    tiny_model: Path, sft_rows: Path, tmp_path: Path
) -> None:
    """Same rows, same total samples (100 steps x 8 rows): DiLoCo's final loss within 10% of
    DDP's, and each process hands gloo exactly H (5) times fewer bytes."""
    s = diloco_settings(steps=100)
    ddp = run_ddp(tiny_model, sft_rows, tmp_path / "ddp", s, nproc=2)
    work = tmp_path / "diloco"
    work.mkdir()
    rec = run_diloco(tiny_model, sft_rows, work, s)
    assert rec.outer_steps == 20 and rec.restarts == [] and rec.recoveries == []
    assert rec.bytes_allreduced == [20 * rec.trainable_bytes] * 2
    assert ddp[0].bytes_allreduced == 100 * rec.trainable_bytes
    assert ddp[0].bytes_allreduced == 5 * rec.bytes_allreduced[0]
    first = read_jsonl(work / "metrics.jsonl")[0]["loss"]
    assert rec.final_loss < 0.8 * first  # it learned
    gap = rec.final_loss / ddp[0].final_loss - 1
    print(f"final loss DDP {ddp[0].final_loss:.4f} DiLoCo {rec.final_loss:.4f} ({gap:+.1%})")
    assert abs(gap) <= 0.10
    # every replica ends with the same global adapter
    losses = [read_record(work / f"replica_{i}.json", ReplicaSummary).final_loss for i in (0, 1)]
    assert losses[0] == pytest.approx(losses[1], rel=1e-6)
    assert read_record(work / "diloco.json", DilocoRunRecord).outer_steps == 20


def _rounds(log: Path) -> list[dict]:
    if not log.is_file():
        return []
    rows = []
    for line in log.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:  # a row being written
            continue
    return [r for r in rows if r.get("event") == "round"]


def _wait_for(predicate, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.time() + timeout_s
    while not predicate():
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def test_kill_9_replica_is_restarted_recovers_from_peer_and_run_completes(
    tiny_model: Path, sft_rows: Path, tmp_path: Path
) -> None:
    """`tuneloop train` with train.diloco: kill -9 replica 1 after its first round; replica 0
    trains on alone, the launcher restarts replica 1, which heals from replica 0 through
    torchft's recovery and finishes the run with it."""
    assert TUNELOOP, "the tuneloop script is not installed"
    out = tmp_path / "adapter"
    cmd = [TUNELOOP, "train", "--method", "sft", "--base", str(tiny_model)]
    cmd += ["--data", str(sft_rows), "--out", str(out), "--no-progress"]
    cmd += ["--steps", "600", "--batch-size", "8", "--learning-rate", "0.003"]
    cmd += ["--lora-r", "8", "--lora-alpha", "16", "--torch-threads", "1"]
    cmd += ["--diloco-replicas", "2", "--diloco-inner-steps", "5"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    work = out.with_name("adapter.partial")
    try:
        _wait_for(lambda: len(_rounds(work / "replica_1.jsonl")) >= 1, 120, "a first round")
        victim = int((work / "replica_1.pid").read_text())
        os.kill(victim, signal.SIGKILL)
        killed_at = time.time()
        stdout, stderr = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr[-3000:]
    assert "replica 1 exited (-9); restarted" in stderr
    rec = read_record(out / "diloco.json", DilocoRunRecord)
    assert rec.outer_steps == 120
    assert [(r["replica"], r["status"]) for r in rec.restarts] == [(1, -9)]
    # the restarted replica healed from the survivor: its outer step jumped past the next one
    assert [r["replica"] for r in rec.recoveries] == [1]
    healed = [r for r in _rounds(out / "replica_1.jsonl") if r["recovered"]]
    assert len(healed) == 1 and healed[0]["outer_after"] > healed[0]["outer_before"] + 1
    # ... after the survivor had trained on alone, committing rounds while replica 1 was down
    alone = [r for r in _rounds(out / "replica_0.jsonl") if killed_at < r["t"] < healed[0]["t"]]
    assert any(r["committed"] and r["participants"] == 1 for r in alone), alone
    last = _rounds(out / "replica_1.jsonl")[-1]
    assert last["outer_after"] == 120 and last["participants"] == 2
    finals = [read_record(out / f"replica_{i}.json", ReplicaSummary) for i in (0, 1)]
    assert finals[1].recovered_to_outer_step == healed[0]["outer_after"] - 1
    assert finals[0].recovered_to_outer_step is None
    assert finals[0].final_loss == pytest.approx(finals[1].final_loss, rel=1e-6)
    assert (out / "adapter_model.safetensors").is_file()
    print(
        json.dumps({"killed_at": killed_at, "restarts": rec.restarts, "recoveries": rec.recoveries})
    )


def test_cli_refuses_diloco_with_grpo_exit_2(
    tiny_model: Path, sft_rows: Path, tmp_path: Path
) -> None:
    assert TUNELOOP
    cmd = [TUNELOOP, "train", "--method", "grpo", "--base", str(tiny_model)]
    cmd += ["--data", str(sft_rows), "--out", str(tmp_path / "a"), "--diloco-replicas", "2"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "train.diloco" in proc.stderr and "Traceback" not in proc.stderr


def test_replica_error_is_raised_not_retried(
    tiny_model: Path, sft_rows: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tuneloop error inside a replica (here: no assistant token within max_length) ends the
    run with that message; the launcher does not restart the replica and stops the others."""
    work = tmp_path / "w"
    work.mkdir()
    with pytest.raises(PhaseFailed, match="no assistant tokens within max_length"):
        run_diloco(tiny_model, sft_rows, work, diloco_settings(max_length=2))
    assert "restarted" not in capsys.readouterr().err
    for i in (0, 1):
        with pytest.raises(ProcessLookupError):
            os.kill(int((work / f"replica_{i}.pid").read_text()), 0)
