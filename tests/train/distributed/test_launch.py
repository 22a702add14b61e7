"""Two real processes (gloo on CPU) give the single process's loss curve: DDP under
`accelerate launch` with a LoRA adapter, FSDP2 under torchrun with full fine-tuning.

The global batch is the same (4 rows: 4 in one process, 2 per rank in two), so the losses
agree step by step up to float32 summation order; TOLERANCE bounds that (measured ~1e-6).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import arith_rows, write_jsonl

from tuneloop.records import read_jsonl, read_record
from tuneloop.train.checkpoint import Lineage, merge
from tuneloop.train.distributed.launch import accelerate_config, launcher_command
from tuneloop.train.run import train
from tuneloop.train.settings import TrainRunRecord, TrainSettings

TOLERANCE = 1e-4
"""Largest absolute difference of a step's loss between 1 and 2 processes."""

BASE = TrainSettings(method="sft", steps=4, batch_size=4, lora={"r": 4, "alpha": 8})


def settings(nproc: int, adapter: str = "lora", **distributed: object) -> TrainSettings:
    return TrainSettings.model_validate(
        {**BASE.model_dump(), "nproc": nproc, "adapter": adapter, "distributed": distributed}
    )


def losses(folder: Path) -> list[float]:
    return [r["loss"] for r in read_jsonl(folder / "metrics.jsonl")]


def max_difference(a: list[float], b: list[float]) -> float:
    assert len(a) == len(b) == BASE.steps
    return max(abs(x - y) for x, y in zip(a, b, strict=True))


@pytest.fixture
def rows16(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "rows.jsonl", arith_rows(16))


def test_accelerate_config_and_commands(tmp_path: Path) -> None:
    cfg = accelerate_config(2, gpu=False, bf16=False, port=29999)
    assert cfg["num_processes"] == 2 and cfg["use_cpu"] and cfg["mixed_precision"] == "no"
    spec = tmp_path / "worker_spec.json"
    acc = launcher_command(settings(2, launcher="accelerate"), spec, gpu=False)
    assert acc[1:3] == ["-m", "accelerate.commands.launch"] and acc[-1] == str(spec)
    written = yaml.safe_load((tmp_path / "accelerate.yaml").read_text(encoding="utf-8"))
    assert written["num_processes"] == 2 and written["distributed_type"] == "MULTI_GPU"
    torchrun = launcher_command(settings(2), spec, gpu=False)
    assert "--nproc_per_node=2" in torchrun and "torch.distributed.run" in torchrun


def test_ddp_under_accelerate_matches_one_process(
    tiny_model: Path, rows16: Path, tmp_path: Path
) -> None:
    one = train(tiny_model, rows16, tmp_path / "one", settings(1), progress=False)
    two = train(
        tiny_model, rows16, tmp_path / "two", settings(2, launcher="accelerate"), progress=False
    )
    diff = max_difference(losses(one), losses(two))
    print(f"DDP-2 (accelerate) vs 1 process: max |Δloss| = {diff:.3g}")
    assert diff <= TOLERANCE
    assert read_record(two / "train_settings.json", TrainRunRecord).nproc == 2
    assert len(losses(two)) == BASE.steps  # rank 0 alone logs


def test_fsdp_full_fine_tuning_matches_one_process_and_merges(
    tiny_model: Path, rows16: Path, tmp_path: Path
) -> None:
    import torch
    from safetensors.torch import load_file

    one = train(tiny_model, rows16, tmp_path / "one", settings(1, "none"), progress=False)
    fsdp = settings(2, "none", strategy="fsdp")
    two = train(tiny_model, rows16, tmp_path / "two", fsdp, progress=False)
    diff = max_difference(losses(one), losses(two))
    print(f"FSDP-2 (torchrun) vs 1 process: max |Δloss| = {diff:.3g}")
    assert diff <= TOLERANCE
    a, b = load_file(str(one / "model.safetensors")), load_file(str(two / "model.safetensors"))
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < 1e-5
    merged = merge(tiny_model, two, tmp_path / "merged", min_change=1e-6)
    assert read_record(merged / "lineage.json", Lineage).full_model
    m = load_file(str(merged / "model.safetensors"))
    assert all(torch.equal(m[k], b[k]) for k in m)
