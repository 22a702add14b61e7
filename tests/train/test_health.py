"""Training health: a NaN stops training before its step is saved; collapse abort; the stop
is recorded for `run.train` (tests/train/test_walkback.py walks back from it)."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from inject import Poison

from tuneloop.config.health import HealthConfig
from tuneloop.errors import PhaseFailed
from tuneloop.records import read_jsonl
from tuneloop.train.health import HealthCallback, fit
from tuneloop.train.methods import sft as sft_module
from tuneloop.train.resume import last_checkpoint
from tuneloop.train.run import train
from tuneloop.train.settings import TrainSettings
from tuneloop.train.walkback import forget_stop, read_stop

NAN_STEP = 5


def test_nan_loss_stops_training_and_keeps_the_last_healthy_checkpoint(
    tiny_model: Path, prompts: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def poisoned_fit(trainer: Any, s: TrainSettings, stage: str) -> Any:
        trainer.add_callback(Poison(NAN_STEP))
        return fit(trainer, s, stage)

    monkeypatch.setattr(sft_module, "fit", poisoned_fit)
    s = TrainSettings(
        method="sft",
        steps=8,
        batch_size=2,
        lora={"r": 4, "alpha": 8},
        checkpoint={"every": 2},
        health={"on_unhealthy": "fail"},
    )
    out = tmp_path / "a"
    with pytest.raises(PhaseFailed, match=rf"stopped at step {NAN_STEP}: non-finite loss=nan") as e:
        train(tiny_model, prompts, out, s, progress=False)
    assert "checkpoint-4" in str(e.value) and "walk" not in str(e.value)  # as before walk-backs
    assert not out.exists()
    stage = tmp_path / "a.partial" / "checkpoints" / "sft"
    assert sorted(p.name for p in stage.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]
    assert last_checkpoint(stage) == stage / "checkpoint-4"
    from safetensors.torch import load_file

    kept = load_file(str(stage / "checkpoint-4" / "adapter_model.safetensors"))
    assert all(bool(t.isfinite().all()) for t in kept.values())
    rows = read_jsonl(tmp_path / "a.partial" / "metrics.jsonl")
    assert [r["step"] for r in rows] == list(range(1, NAN_STEP + 1))
    assert math.isnan(rows[-1]["loss"])  # the bad step is on record


def _state(step: int) -> SimpleNamespace:
    return SimpleNamespace(global_step=step, is_world_process_zero=True)


def _grpo_logs(reward: float, kl: float = 0.0, entropy: float = 1.0) -> dict[str, float]:
    return {
        "loss": 0.1,
        "grad_norm": 0.2,
        "reward": reward,
        "frac_reward_zero_std": 1.0,
        "kl": kl,
        "entropy": entropy,
    }


def test_collapse_abort_stops_after_a_window_and_warn_only_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    abort = HealthCallback(
        HealthConfig(on_collapse="abort", collapse_window=3), phase="grpo", checkpoints=tmp_path
    )
    ctl = SimpleNamespace(should_save=False)
    for step in (1, 2):
        abort.on_log(None, _state(step), ctl, logs=_grpo_logs(0.0))
    with pytest.raises(PhaseFailed, match=r"grpo\) stopped at step 3: .*on_collapse: abort"):
        abort.on_log(None, _state(3), ctl, logs=_grpo_logs(0.0))
    warn = HealthCallback(HealthConfig(collapse_window=3), phase="grpo", checkpoints=tmp_path)
    for step in range(1, 6):
        warn.on_log(None, _state(step), ctl, logs=_grpo_logs(0.0))
    assert capsys.readouterr().err.count("warning: grpo:") == 1


def test_a_stop_is_recorded_for_run_train_by_the_main_process(tmp_path: Path) -> None:
    h = HealthConfig(on_collapse="abort", collapse_window=1)
    folder = tmp_path / "checkpoints" / "grpo"
    cb = HealthCallback(h, phase="grpo", checkpoints=folder, run_dir=tmp_path)
    ctl = SimpleNamespace(should_save=False)
    with pytest.raises(PhaseFailed) as e:
        cb.on_log(None, _state(4), ctl, logs=_grpo_logs(0.0))
    stop = read_stop(tmp_path)
    assert stop is not None and (stop.stage, stop.step) == ("grpo", 4)
    assert stop.message == str(e.value) and str(e.value).startswith(stop.reason)
    assert stop.reason.startswith("training (grpo) stopped at step 4: grpo: reward ≤ 0")
    forget_stop(tmp_path)
    other = HealthCallback(h, phase="grpo", checkpoints=folder, run_dir=tmp_path)
    rank1 = SimpleNamespace(global_step=4, is_world_process_zero=False)
    with pytest.raises(PhaseFailed):
        other.on_log(None, rank1, ctl, logs=_grpo_logs(0.0))
    assert read_stop(tmp_path) is None


def test_kl_and_entropy_bounds_feed_the_collapse_monitor(tmp_path: Path) -> None:
    h = HealthConfig(on_collapse="abort", collapse_window=2, max_kl=0.5, min_entropy=0.1)
    cb = HealthCallback(h, phase="grpo", checkpoints=tmp_path)
    ctl = SimpleNamespace(should_save=False)
    cb.on_log(None, _state(1), ctl, logs=_grpo_logs(0.5, kl=0.9))
    with pytest.raises(PhaseFailed, match=r"KL > 0.5 for the last 2"):
        cb.on_log(None, _state(2), ctl, logs=_grpo_logs(0.5, kl=0.8))
    cb = HealthCallback(h, phase="grpo", checkpoints=tmp_path)
    cb.on_log(None, _state(1), ctl, logs=_grpo_logs(0.5, entropy=0.01))
    with pytest.raises(PhaseFailed, match=r"entropy < 0.1"):
        cb.on_log(None, _state(2), ctl, logs=_grpo_logs(0.5, entropy=0.02))


def test_nonfinite_warn_mode_trains_on(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cb = HealthCallback(HealthConfig(on_nonfinite="warn"), phase="sft", checkpoints=tmp_path)
    cb.on_log(None, _state(3), SimpleNamespace(should_save=False), logs={"loss": math.inf})
    assert "step 3: non-finite loss=inf" in capsys.readouterr().err


def test_restore_from_a_final_full_model_checkpoint(tiny_model: Path, tmp_path: Path) -> None:
    """`train.adapter: none`: a final checkpoint holds the whole model, not an adapter."""
    import torch
    from safetensors.torch import save_file

    from tuneloop.train.common import load_model
    from tuneloop.train.health import restore_adapter

    model = load_model(tiny_model)
    saved = {k: v.clone() + 1.0 for k, v in model.state_dict().items() if k != "lm_head.weight"}
    (tmp_path / "checkpoint-2").mkdir()
    save_file(saved, str(tmp_path / "checkpoint-2" / "model.safetensors"))
    restore_adapter(model, tmp_path / "checkpoint-2")
    now = model.state_dict()
    assert all(torch.equal(now[k], saved[k]) for k in saved)
