from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import arith_rows, write_jsonl

from tuneloop.errors import InputError
from tuneloop.records import read_record, sha256_file
from tuneloop.train import TrainRunRecord, TrainSettings, train

TINY = TrainSettings(
    steps=2, batch_size=2, group_size=2, max_completion_length=4, lora_r=4, lora_alpha=8
)


def test_sft_writes_adapter_metrics_and_settings(
    tiny_model: Path, prompts: Path, tmp_path: Path
) -> None:
    out = train("sft", tiny_model, prompts, tmp_path / "sft", TINY, progress=False)
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
    out = train("dpo", tiny_model, data, tmp_path / "dpo", TINY, progress=False)
    assert (out / "adapter_model.safetensors").is_file()


def test_contamination_refused_then_recorded(
    tiny_model: Path, prompts: Path, tmp_path: Path
) -> None:
    suite = write_jsonl(tmp_path / "suite.jsonl", [{**arith_rows(1)[0], "id": "suite-0"}])
    with pytest.raises(InputError, match=r"prompts\.jsonl:1 ~ suite-0"):
        train("sft", tiny_model, prompts, tmp_path / "x", TINY, suite_paths=[suite])
    assert not (tmp_path / "x").exists()
    out = train(
        "sft",
        tiny_model,
        prompts,
        tmp_path / "y",
        TINY,
        suite_paths=[suite],
        allow_contamination=True,
        progress=False,
    )
    rec = read_record(out / "train_settings.json", TrainRunRecord)
    assert rec.allow_contamination and rec.contaminated_rows == [f"{prompts}:1 ~ suite-0"]


def test_bad_inputs_are_input_errors(tiny_model: Path, prompts: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="did you mean 'sft'"):
        train("sfd", tiny_model, prompts, tmp_path / "a", TINY)
    with pytest.raises(InputError, match="no config.json"):
        train("sft", tmp_path, prompts, tmp_path / "a", TINY)
    (tmp_path / "exists").mkdir()
    with pytest.raises(InputError, match="already exists"):
        train("sft", tiny_model, prompts, tmp_path / "exists", TINY)


def test_grpo_under_torchrun_two_processes(tiny_model: Path, prompts: Path, tmp_path: Path) -> None:
    out = train("grpo", tiny_model, prompts, tmp_path / "ddp", TINY, nproc=2, progress=False)
    assert (out / "adapter_model.safetensors").is_file()
    rec = read_record(out / "train_settings.json", TrainRunRecord)
    assert rec.nproc == 2
    rows = (out / "metrics.jsonl").read_text().splitlines()
    assert len(rows) == 2  # only rank 0 logs


def test_grpo_with_sft_warmup_logs_both_phases(
    tiny_model: Path, prompts: Path, tmp_path: Path
) -> None:
    from dataclasses import replace

    s = replace(TINY, sft_warmup_steps=2, sft_warmup_batch_size=4)
    out = train("grpo", tiny_model, prompts, tmp_path / "w", s, progress=False)
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["phase"] for r in rows] == ["sft_warmup"] * 2 + ["grpo"] * 2
