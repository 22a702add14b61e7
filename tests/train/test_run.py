from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import arith_rows, write_jsonl
from transformers import TrainerCallback

from tuneloop.config.health import CheckpointConfig
from tuneloop.errors import InputError
from tuneloop.records import read_jsonl, read_record, sha256_file
from tuneloop.train.run import train
from tuneloop.train.settings import TrainRunRecord, TrainSettings

TINY = TrainSettings(
    method="sft",
    steps=2,
    batch_size=2,
    grpo={"group_size": 2, "max_completion_length": 4},
    lora={"r": 4, "alpha": 8},
)


def tiny(method: str, **update: object) -> TrainSettings:
    return TINY.model_copy(update={"method": method, **update})


def test_sft_writes_adapter_metrics_and_settings(
    tiny_model: Path, prompts: Path, tmp_path: Path
) -> None:
    out = train(tiny_model, prompts, tmp_path / "sft", tiny("sft"), progress=False)
    assert (out / "adapter_config.json").is_file()
    assert (out / "adapter_model.safetensors").is_file()
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2] and all("loss" in r for r in rows)
    rec = read_record(out / "train_settings.json", TrainRunRecord)
    assert rec.method == "sft" and rec.data_sha256 == sha256_file(prompts)
    assert rec.settings["steps"] == 2 and not rec.allow_contamination
    assert not list(tmp_path.glob(".sft.*"))  # the temp folder was renamed into place


def test_dpo_trains(tiny_model: Path, tmp_path: Path) -> None:
    data = write_jsonl(
        tmp_path / "d.jsonl",
        [
            {"prompt": f"What is {i} + 1?", "chosen": str(i + 1), "rejected": str(i)}
            for i in range(4)
        ],
    )
    out = train(tiny_model, data, tmp_path / "dpo", tiny("dpo"), progress=False)
    assert (out / "adapter_model.safetensors").is_file()


def test_contamination_refused_then_recorded(
    tiny_model: Path, prompts: Path, tmp_path: Path
) -> None:
    suite = write_jsonl(tmp_path / "suite.jsonl", [{**arith_rows(1)[0], "id": "suite-0"}])
    with pytest.raises(InputError, match=r"prompts\.jsonl:1 ~ suite-0"):
        train(tiny_model, prompts, tmp_path / "x", tiny("sft"), suite_paths=[suite])
    assert not (tmp_path / "x").exists()
    out = train(
        tiny_model,
        prompts,
        tmp_path / "y",
        tiny("sft", allow_contamination=True),
        suite_paths=[suite],
        progress=False,
    )
    rec = read_record(out / "train_settings.json", TrainRunRecord)
    assert rec.allow_contamination and rec.contaminated_rows == [f"{prompts}:1 ~ suite-0"]


def test_bad_inputs_are_input_errors(tiny_model: Path, prompts: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="did you mean 'sft'"):
        train(tiny_model, prompts, tmp_path / "a", tiny("sfd"))
    with pytest.raises(InputError, match="no config.json"):
        train(tmp_path, prompts, tmp_path / "a", tiny("sft"))
    (tmp_path / "exists").mkdir()
    with pytest.raises(InputError, match="already exists"):
        train(tiny_model, prompts, tmp_path / "exists", tiny("sft"))


def test_grpo_under_torchrun_two_processes(tiny_model: Path, prompts: Path, tmp_path: Path) -> None:
    out = train(tiny_model, prompts, tmp_path / "ddp", tiny("grpo", nproc=2), progress=False)
    assert (out / "adapter_model.safetensors").is_file()
    rec = read_record(out / "train_settings.json", TrainRunRecord)
    assert rec.nproc == 2
    rows = (out / "metrics.jsonl").read_text().splitlines()
    assert len(rows) == 2  # only rank 0 logs


def test_grpo_with_sft_warmup_logs_both_phases(
    tiny_model: Path, prompts: Path, tmp_path: Path
) -> None:
    s = tiny("grpo", sft_warmup_steps=2, sft_warmup_batch_size=4)
    out = train(tiny_model, prompts, tmp_path / "w", s, progress=False)
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["phase"] for r in rows] == ["sft_warmup"] * 2 + ["grpo"] * 2


def test_grpo_warms_up_on_its_own_file(tiny_model: Path, prompts: Path, tmp_path: Path) -> None:
    from tuneloop.records import sha256_file

    from .conftest import arith_rows, write_jsonl

    warm = write_jsonl(tmp_path / "warm.jsonl", arith_rows(6, start=100))
    suite = write_jsonl(tmp_path / "suite.jsonl", [{**arith_rows(1, 102)[0], "id": "suite-0"}])
    s = tiny("grpo", sft_warmup_steps=2, sft_warmup_batch_size=4, sft_warmup_data=warm)
    missing = s.model_copy(update={"sft_warmup_data": tmp_path / "none.jsonl"})
    with pytest.raises(InputError, match=r"train\.sft_warmup_data: .*none\.jsonl not found"):
        train(tiny_model, prompts, tmp_path / "m", missing, progress=False)
    assert not (tmp_path / "m").exists() and not (tmp_path / "m.partial").exists()
    # the warm-up's rows are trained on too: matched against the suite before anything runs
    with pytest.raises(InputError, match=r"warm\.jsonl:3 ~ suite-0"):
        train(tiny_model, prompts, tmp_path / "x", s, suite_paths=[suite], progress=False)
    out = train(tiny_model, prompts, tmp_path / "w", s, progress=False)
    rec = read_record(out / "train_settings.json", TrainRunRecord)
    assert rec.warmup_data_sha256 == sha256_file(warm) and rec.data_rows == 8
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["phase"] for r in rows] == ["sft_warmup"] * 2 + ["grpo"] * 2
    # a malformed warm-up row is named by its own file and line
    warm.write_text('{"messages": []}\n')
    with pytest.raises(InputError, match=r"warm\.jsonl:1"):
        train(tiny_model, prompts, tmp_path / "z", s, progress=False)


# ---- checkpoints and resume --------------------------------------------------------------

RESUMABLE = ("--steps", "40", "--batch-size", "2", "--lora-r", "4", "--checkpoint-every", "4")


def tuneloop_train(base: Path, data: Path, out: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "tuneloop",
        "train",
        "--method",
        "sft",
        "--base",
        str(base),
        "--data",
        str(data),
        "--out",
        str(out),
        "--no-progress",
        "--torch-threads",
        "1",
        *RESUMABLE,
        *extra,
    ]


def adapter_tensors(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "adapter_model.safetensors"))


def test_kill_9_then_resume_equals_an_uninterrupted_run(
    tiny_model: Path, prompts: Path, tmp_path: Path
) -> None:

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = tmp_path / "killed"
    proc = subprocess.Popen(tuneloop_train(tiny_model, prompts, out), env=env)
    stage = tmp_path / "killed.partial" / "checkpoints" / "sft"
    deadline = time.monotonic() + 120
    while not (stage / "checkpoint-8" / "trainer_state.json").is_file():
        assert proc.poll() is None and time.monotonic() < deadline, "no checkpoint-8 appeared"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not out.exists(), "the run finished before the kill; the test proves nothing"
    killed_at = len((tmp_path / "killed.partial" / "metrics.jsonl").read_text().splitlines())
    resumed = subprocess.run(
        tuneloop_train(tiny_model, prompts, out), env=env, capture_output=True, text=True
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "sft: resuming from" in resumed.stderr and "optimizer, scheduler" in resumed.stderr
    straight = subprocess.run(
        tuneloop_train(tiny_model, prompts, tmp_path / "straight"), env=env, capture_output=True
    )
    assert straight.returncode == 0
    a, b = adapter_tensors(out), adapter_tensors(tmp_path / "straight")
    assert a.keys() == b.keys()
    diff = max(float((a[k] - b[k]).abs().max()) for k in a)
    assert diff == 0.0, f"resumed adapter differs by {diff} (killed after {killed_at} rows)"
    steps = [r["step"] for r in read_jsonl(out / "metrics.jsonl")]
    assert steps == list(range(1, 41))  # rows logged after checkpoint-8 were dropped
    assert not (out / "checkpoints").exists() and not (tmp_path / "killed.partial").exists()


def test_rerun_returns_the_adapter_and_refuses_other_settings_on_a_partial(
    tiny_model: Path, prompts: Path, tmp_path: Path
) -> None:
    s = tiny("sft", checkpoint=CheckpointConfig(every=1))
    out = train(tiny_model, prompts, tmp_path / "a", s, progress=False)
    stamp = (out / "adapter_model.safetensors").stat().st_mtime_ns
    assert train(tiny_model, prompts, out, s.model_copy(update={"torch_threads": 1})) == out
    assert (out / "adapter_model.safetensors").stat().st_mtime_ns == stamp
    with pytest.raises(InputError, match="already exists"):
        train(tiny_model, prompts, out, s.model_copy(update={"learning_rate": 1e-3}))
    # a killed run's folder with checkpoints: only the same run may resume there
    partial = tmp_path / "b.partial"
    partial.mkdir()
    (partial / "train_settings.json").write_bytes((out / "train_settings.json").read_bytes())
    ckpt = partial / "checkpoints" / "sft" / "checkpoint-1"
    ckpt.mkdir(parents=True)
    (ckpt / "trainer_state.json").write_text("{}")
    other = s.model_copy(update={"learning_rate": 1e-3, "seed": 3})
    with pytest.raises(InputError, match=r"b\.partial: .*train\.learning_rate, train\.seed"):
        train(tiny_model, prompts, tmp_path / "b", other)
    assert ckpt.is_dir()  # refused, not replaced


def test_the_installed_script_exits_3_on_a_diverged_run(
    tiny_model: Path, prompts: Path, tmp_path: Path
) -> None:
    out = tmp_path / "nan"
    # a learning rate of 1e30 makes the second step's loss non-finite
    cmd = tuneloop_train(tiny_model, prompts, out, "--steps", "6", "--learning-rate", "1e30")
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ})
    assert done.returncode == 3, done.stderr
    assert "error: training (sft) stopped at step" in done.stderr
    assert "non-finite" in done.stderr and "Traceback" not in done.stderr
    assert not out.exists()


class Crash(TrainerCallback):  # type: ignore[misc]
    """Raise as optimizer step `step` begins (a crash mid-run)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if state.global_step + 1 == self.step:
            raise RuntimeError("crash")


def test_grpo_after_warmup_resumes_in_its_second_stage(
    tiny_model: Path, prompts: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    from tuneloop.train.health import fit
    from tuneloop.train.methods import grpo as grpo_module

    s = tiny("grpo", steps=4, sft_warmup_steps=2, checkpoint=CheckpointConfig(every=2))
    straight = train(tiny_model, prompts, tmp_path / "straight", s, progress=False)

    def crashing_fit(trainer: Any, settings: TrainSettings, stage: str) -> Any:
        if stage == "grpo":
            trainer.add_callback(Crash(3))
        return fit(trainer, settings, stage)

    with monkeypatch.context() as m:
        m.setattr(grpo_module, "fit", crashing_fit)
        with pytest.raises(RuntimeError, match="crash"):
            train(tiny_model, prompts, tmp_path / "r", s, progress=False)
    assert (tmp_path / "r.partial" / "checkpoints" / "grpo" / "checkpoint-2").is_dir()
    resumed = train(tiny_model, prompts, tmp_path / "r", s, progress=False)
    a, b = adapter_tensors(resumed), adapter_tensors(straight)
    diff = max(float((a[k] - b[k]).abs().max()) for k in a)
    assert all(torch.equal(a[k], b[k]) for k in a), diff
    rows = [(r["phase"], r["step"]) for r in read_jsonl(resumed / "metrics.jsonl")]
    assert rows == [("sft_warmup", 1), ("sft_warmup", 2)] + [("grpo", i) for i in range(1, 5)]
