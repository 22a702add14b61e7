from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import arith_rows, write_jsonl

from tuneloop.errors import InputError
from tuneloop.records import read_record, sha256_file
from tuneloop.train import TrainRunRecord, TrainSettings, train

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
