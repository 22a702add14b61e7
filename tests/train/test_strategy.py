"""`train.distributed` and `train.adapter`: TRL arguments, refusals before any model loads,
gradient checkpointing, and full fine-tuning through to the merged model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tuneloop.errors import InputError
from tuneloop.records import read_jsonl, read_record
from tuneloop.train.checkpoint import Lineage, merge
from tuneloop.train.run import train
from tuneloop.train.settings import TrainSettings
from tuneloop.train.strategy import check_strategy, installed, strategy_args

TINY = TrainSettings(method="sft", steps=2, batch_size=2, lora={"r": 4, "alpha": 8})


def with_distributed(**d: object) -> TrainSettings:
    return TrainSettings.model_validate({**TINY.model_dump(), "distributed": d})


def test_strategy_reaches_the_trl_arguments() -> None:
    fsdp = strategy_args(with_distributed(strategy="fsdp", gradient_checkpointing=True), False)
    assert fsdp["fsdp"] == "full_shard auto_wrap" and fsdp["fsdp_config"]["version"] == 2
    # FSDP checkpoints activations itself; transformers refuses both at once
    assert fsdp["fsdp_config"]["activation_checkpointing"] and "gradient_checkpointing" not in fsdp
    ddp = strategy_args(with_distributed(gradient_checkpointing=True), False)
    assert ddp["gradient_checkpointing"] and "fsdp" not in ddp and ddp["bf16"] is False
    assert (
        strategy_args(TINY, True)["bf16"]
        and strategy_args(with_distributed(bf16=True), False)["bf16"]
    )
    ds = strategy_args(with_distributed(strategy="deepspeed", deepspeed_stage=3), True)
    assert ds["deepspeed"]["zero_optimization"] == {"stage": 3}


@pytest.mark.skipif(installed("deepspeed"), reason="deepspeed is installed here")
def test_deepspeed_missing_is_named() -> None:
    with pytest.raises(InputError, match=r"strategy: deepspeed needs the `deepspeed` package"):
        check_strategy(with_distributed(strategy="deepspeed"), gpu=True)


def test_4bit_needs_bitsandbytes_a_gpu_and_an_adapter() -> None:
    s = with_distributed(load_in_4bit=True)
    with pytest.raises(InputError, match="load_in_4bit: QLoRA needs .*a CUDA GPU"):
        check_strategy(s, gpu=False)
    if not installed("bitsandbytes"):
        with pytest.raises(InputError, match="the `bitsandbytes` package"):
            check_strategy(s, gpu=True)
    full = s.model_copy(update={"method": "composite", "adapter": "none"})
    with pytest.raises(InputError, match="train.adapter: none does not fit method composite"):
        check_strategy(full.model_copy(update={"distributed": TINY.distributed}), gpu=False)


def test_fsdp_refuses_what_it_does_not_cover() -> None:
    fsdp = with_distributed(strategy="fsdp")
    assert check_strategy(fsdp, gpu=False) is None  # plain SFT: fine
    warm = fsdp.model_copy(update={"method": "grpo", "sft_warmup_steps": 2})
    with pytest.raises(InputError, match="fsdp does not fit train.sft_warmup_steps > 0"):
        check_strategy(warm, gpu=False)
    ckpt = TrainSettings.model_validate({**fsdp.model_dump(), "checkpoint": {"every": 2}})
    with pytest.raises(InputError, match="train.checkpoint.every: checkpoints of strategy fsdp"):
        check_strategy(ckpt, gpu=False)
    check_strategy(ckpt, gpu=True)


def test_the_installed_script_exits_2_before_loading_a_model(tmp_path: Path) -> None:
    """A base that does not exist: the strategy check comes first and names the key."""
    cmd = [sys.executable, "-m", "tuneloop", "train", "--base", str(tmp_path / "no-model")]
    cmd += ["--data", str(tmp_path / "d.jsonl"), "--out", str(tmp_path / "o"), "--no-progress"]
    (tmp_path / "d.jsonl").write_text('{"prompt": "1 + 1?", "answer": "2"}\n')
    done = subprocess.run(
        [*cmd, "--distributed-load-in-4bit"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stderr
    assert "train.distributed.load_in_4bit: QLoRA needs" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "o").exists()


def test_gradient_checkpointing_gives_the_same_losses(
    tiny_model: Path, prompts: Path, tmp_path: Path
) -> None:
    plain = train(tiny_model, prompts, tmp_path / "a", TINY, progress=False)
    ckpt = with_distributed(gradient_checkpointing=True)
    recomputed = train(tiny_model, prompts, tmp_path / "b", ckpt, progress=False)
    a = [r["loss"] for r in read_jsonl(plain / "metrics.jsonl")]
    b = [r["loss"] for r in read_jsonl(recomputed / "metrics.jsonl")]
    assert max(abs(x - y) for x, y in zip(a, b, strict=True)) < 1e-5


def test_full_fine_tuning_becomes_the_merged_model(
    tiny_model: Path, prompts: Path, tmp_path: Path
) -> None:
    import torch
    from safetensors.torch import load_file

    s = TINY.model_copy(update={"adapter": "none"})
    trained = train(tiny_model, prompts, tmp_path / "full", s, progress=False)
    assert (trained / "model.safetensors").is_file()
    assert not (trained / "adapter_config.json").exists()
    assert train(tiny_model, prompts, trained, s) == trained  # a re-run finds it complete
    merged = merge(tiny_model, trained, tmp_path / "m", min_change=1e-6)
    lineage = read_record(merged / "lineage.json", Lineage)
    assert lineage.full_model and lineage.max_abs_diff and lineage.max_abs_diff > 1e-6
    a, b = (
        load_file(str(trained / "model.safetensors")),
        load_file(str(merged / "model.safetensors")),
    )
    assert all(torch.equal(a[k], b[k]) for k in b)
    assert json.loads((merged / "generation_config.json").read_text())["eos_token_id"]
