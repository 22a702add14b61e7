from __future__ import annotations

from pathlib import Path

import pytest

from tuneloop.errors import InputError, PhaseFailed
from tuneloop.records import read_record, sha256_path
from tuneloop.train.checkpoint import Lineage, doctor, merge
from tuneloop.train.run import train
from tuneloop.train.settings import TrainSettings

TINY = TrainSettings(method="sft", steps=1, batch_size=2, lora={"r": 4, "alpha": 8})


@pytest.fixture(scope="module")
def adapter(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    import json

    folder = tmp_path_factory.mktemp("adapter")
    data = folder / "d.jsonl"
    data.write_text(json.dumps({"prompt": "What is 1 + 1?", "answer": "2"}) + "\n")
    return train(tiny_model, data, folder / "a", TINY, progress=False)


def _weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def test_merge_writes_standalone_checkpoint_with_lineage(
    tiny_model: Path, adapter: Path, tmp_path: Path
) -> None:
    out = merge(tiny_model, adapter, tmp_path / "m")
    for name in ("config.json", "model.safetensors", "tokenizer.json", "generation_config.json"):
        assert (out / name).is_file(), name
    lin = read_record(out / "lineage.json", Lineage)
    assert lin.base_sha256 == sha256_path(tiny_model)
    assert lin.adapter_sha256 == sha256_path(adapter)
    assert lin.end_of_turn_token_id == 2
    assert not any(k.endswith("lora_A.weight") for k in _weights(out))
    assert not list(tmp_path.glob(".m.*"))


def test_merge_skips_same_lineage_and_refuses_another(
    tiny_model: Path, adapter: Path, tmp_path: Path
) -> None:
    out = merge(tiny_model, adapter, tmp_path / "m")
    stamp = (out / "model.safetensors").stat().st_mtime_ns
    assert merge(tiny_model, adapter, tmp_path / "m") == out
    assert (out / "model.safetensors").stat().st_mtime_ns == stamp
    with pytest.raises(InputError, match="different lineage"):
        merge(tiny_model, None, tmp_path / "m")


def test_zero_adapter_passes_base_weights_through(tiny_model: Path, tmp_path: Path) -> None:
    import torch

    out = merge(tiny_model, None, tmp_path / "z")
    base, merged = _weights(tiny_model), _weights(out)
    assert base.keys() == merged.keys()
    assert all(torch.equal(base[k], merged[k]) for k in base)
    assert read_record(out / "lineage.json", Lineage).adapter is None


def test_adapter_input_is_checked(tiny_model: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="tuneloop train"):
        merge(tiny_model, tmp_path, tmp_path / "m")


def test_doctor_accepts_the_merged_demo_model(arith_model: Path, tmp_path: Path) -> None:
    out = merge(arith_model, None, tmp_path / "demo")
    report = doctor(out)
    assert report.ok, report.checks
    assert [c.name for c in report.checks] == [
        "shards",
        "finite",
        "shapes",
        "tokenizer",
        "stop_tokens",
        "generation",
    ]


def test_merge_records_the_weight_change_and_the_zero_adapter_none(
    tiny_model: Path, adapter: Path, tmp_path: Path
) -> None:
    lin = read_record(merge(tiny_model, adapter, tmp_path / "m") / "lineage.json", Lineage)
    assert lin.max_abs_diff is not None and lin.max_abs_diff > 1e-5
    assert lin.max_diff_tensor is not None and "proj" in lin.max_diff_tensor
    zero = merge(tiny_model, None, tmp_path / "z", min_change=1.0)  # the control is not held
    assert read_record(zero / "lineage.json", Lineage).max_abs_diff == 0.0


def test_merge_fails_when_the_adapter_changes_nothing(
    tiny_model: Path, adapter: Path, tmp_path: Path
) -> None:
    with pytest.raises(PhaseFailed, match=r"merge\.min_change = 1 .*changes nothing"):
        merge(tiny_model, adapter, tmp_path / "m", min_change=1.0)
    assert not (tmp_path / "m").exists() and not list(tmp_path.glob(".m.*"))
