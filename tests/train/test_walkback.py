"""Walk back, do not just stop: after an unhealthy end, the newest healthy checkpoint is published.

The choice is pure over the log's rows and the checkpoint steps (the weights behind a
callable), tested as such first; then real runs on the tiny model with a fault injected: a
NaN weight at step 5 of an SFT run, a GRPO reward that collapses to 0, a GRPO reward that
falls from its start, and runs in which no checkpoint is healthy, which fail as before.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from conftest import arith_rows, write_jsonl
from inject import KeepCopies, Poison, use_script

from tuneloop.config.health import HealthConfig
from tuneloop.errors import PhaseFailed
from tuneloop.records import read_jsonl, read_record
from tuneloop.train.health import fit
from tuneloop.train.methods import sft as sft_module
from tuneloop.train.run import SETTINGS_FILE, train
from tuneloop.train.settings import TrainRunRecord, TrainSettings
from tuneloop.train.walkback import choose_checkpoint, log_checks, walk_back_problems

# ---- the choice, pure ------------------------------------------------------------------------


def rows(rewards: list[float], spread: list[float] | None = None) -> list[dict[str, Any]]:
    """GRPO metrics rows, steps 1.. (`spread`: the share of groups with equal rewards)."""
    spread = spread or [0.0] * len(rewards)
    return [
        {"step": i + 1, "phase": "grpo", "loss": 0.1, "reward_mean": r, "frac_zero_spread": z}
        for i, (r, z) in enumerate(zip(rewards, spread, strict=True))
    ]


def fine(step: int) -> str | None:
    return None


def test_a_nan_walks_back_to_the_newest_checkpoint_before_it() -> None:
    log = [{"step": s, "phase": "sft", "loss": 1.0 / s} for s in range(1, 5)]
    log.append({"step": 5, "phase": "sft", "loss": math.nan})
    choice = choose_checkpoint([2, 4], log, HealthConfig(), fine)
    assert choice.step == 4 and choice.skipped == []
    assert choice.checks == ["no non-finite loss or grad_norm through step 4", "finite weights"]


def test_a_collapse_walks_back_to_before_its_window_began() -> None:
    h = HealthConfig(collapse_window=3)
    log = rows([0.5] * 4 + [0.0] * 3, [0.0] * 4 + [1.0] * 3)  # collapsed from step 5, seen at 7
    choice = choose_checkpoint([2, 4, 6], log, h, fine)
    assert choice.step == 4
    assert choice.skipped == ["checkpoint-6: inside the collapse that began at step 5"]
    assert "saved before the collapse that began at step 5" in choice.checks
    # a window of 3 not yet full at step 6: the checkpoint is still inside what collapsed
    assert [c.passed for c in log_checks(6, log, h)] == [True, False]


def test_a_reward_drop_walks_back_to_where_the_reward_held() -> None:
    h = HealthConfig(collapse_window=2, reward_drop=0.3)
    log = rows([0.8, 0.7, 0.8, 0.7, 0.3, 0.2, 0.2, 0.1])
    choice = choose_checkpoint([2, 4, 6, 8], log, h, fine)
    assert choice.step == 4
    assert [s.split(":")[0] for s in choice.skipped] == ["checkpoint-8", "checkpoint-6"]
    assert "reward 0.75 ≥ start 0.75 − reward_drop 0.3" in choice.checks
    assert "reward 0.25 < start 0.75 − reward_drop 0.3" in choice.skipped[1]


def test_non_finite_weights_are_passed_over_and_read_only_when_the_log_passes() -> None:
    read: list[int] = []

    def weights(step: int) -> str | None:
        read.append(step)
        return "non-finite weight lora_A" if step == 4 else None

    h = HealthConfig(collapse_window=3)
    log = rows([0.5] * 4 + [0.0] * 3, [0.0] * 4 + [1.0] * 3)
    choice = choose_checkpoint([2, 4, 6], log, h, weights)
    assert choice.step == 2 and read == [4, 2]  # checkpoint-6 failed on the log alone
    assert choice.skipped[-1] == "checkpoint-4: non-finite weight lora_A"


def test_none_healthy_and_what_the_warn_settings_forgive() -> None:
    log = rows([0.0] * 4, [1.0] * 4)
    assert choose_checkpoint([1, 2, 3], log, HealthConfig(collapse_window=2), fine).step is None
    nan = [{"step": 1, "loss": math.nan}, {"step": 2, "loss": 0.5}]
    assert choose_checkpoint([2], nan, HealthConfig(), fine).step is None
    # on_nonfinite: warn trains on through a NaN step (fp16 loss scaling skips it), so it is
    # no reason to pass a checkpoint over
    assert choose_checkpoint([2], nan, HealthConfig(on_nonfinite="warn"), fine).step == 2
    assert choose_checkpoint([], nan, HealthConfig(), fine).skipped == []


def test_check_warns_when_the_checkpoints_cannot_serve_a_walk_back() -> None:
    def problems(**kw: Any) -> list[str]:
        return [key for key, _ in walk_back_problems(TrainSettings(**kw))]

    assert problems() == []  # the defaults: nothing asks for an unhealthy end but a NaN
    assert problems(health={"on_collapse": "abort"}) == ["train.checkpoint.every"]
    assert problems(health={"reward_drop": 0.1}) == ["train.checkpoint.every"]
    assert problems(health={"reward_drop": 0.1, "on_unhealthy": "fail"}) == []
    abort = {"on_collapse": "abort", "collapse_window": 10}
    assert problems(health=abort, checkpoint={"every": 10, "keep": 2}) == []
    assert problems(health=abort, checkpoint={"every": 4, "keep": 2}) == ["train.checkpoint.keep"]
    assert problems(health=abort, checkpoint={"every": 4, "keep": 4}) == []


def test_a_bad_setting_is_refused_naming_its_key() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="on_unhealthy"):
        HealthConfig(on_unhealthy="retry")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="reward_drop"):
        HealthConfig(reward_drop=0)


# ---- real runs, a fault injected -------------------------------------------------------------


def _tensors(path: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(path))


def test_a_nan_at_step_5_publishes_checkpoint_4(
    tiny_model: Path, prompts: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def poisoned_fit(trainer: Any, s: TrainSettings, stage: str) -> Any:
        trainer.add_callback(Poison(5))
        trainer.add_callback(KeepCopies(tmp_path / "copies"))
        return fit(trainer, s, stage)

    monkeypatch.setattr(sft_module, "fit", poisoned_fit)
    s = TrainSettings(
        method="sft", steps=8, batch_size=2, lora={"r": 4, "alpha": 8}, checkpoint={"every": 2}
    )
    out = train(tiny_model, prompts, tmp_path / "a", s, progress=False)
    import torch

    published = _tensors(out / "adapter_model.safetensors")
    kept = _tensors(tmp_path / "copies" / "checkpoint-4" / "adapter_model.safetensors")
    assert published.keys() == kept.keys()
    assert all(torch.equal(published[k], kept[k]) for k in kept)
    assert all(bool(t.isfinite().all()) for t in published.values())
    record = read_record(out / SETTINGS_FILE, TrainRunRecord)
    w = record.walk_back
    assert w is not None
    assert (w.checkpoint, w.step, w.steps, w.ended_step) == ("checkpoint-4", 4, 8, 5)
    assert w.line().startswith(
        "walked back to checkpoint-4 (step 4 of 8): training (sft) stopped at step 5: "
        "non-finite loss=nan"
    )
    assert w.checks == ["no non-finite loss or grad_norm through step 4", "finite weights"]
    assert (record.stop, record.steps_done) == ("unhealthy", 5)
    assert (out / "adapter_config.json").is_file() and (out / "tokenizer.json").is_file()
    assert not (out / "optimizer.pt").exists() and not (out / "checkpoints").exists()
    assert not (out / "health_stop.json").exists()  # what it said is in the record


def test_a_full_fine_tuning_run_walks_back_to_the_whole_model(
    tiny_model: Path, prompts: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`train.adapter: none`: the checkpoint holds the whole model, and that is published."""

    def poisoned_fit(trainer: Any, s: TrainSettings, stage: str) -> Any:
        trainer.add_callback(Poison(3))
        trainer.add_callback(KeepCopies(tmp_path / "copies", "model.safetensors"))
        return fit(trainer, s, stage)

    monkeypatch.setattr(sft_module, "fit", poisoned_fit)
    s = TrainSettings(method="sft", steps=4, batch_size=2, adapter="none", checkpoint={"every": 2})
    out = train(tiny_model, prompts, tmp_path / "a", s, progress=False)
    kept = tmp_path / "copies" / "checkpoint-2" / "model.safetensors"
    assert (out / "model.safetensors").read_bytes() == kept.read_bytes()
    assert (out / "config.json").is_file() and not (out / "adapter_config.json").exists()
    record = read_record(out / SETTINGS_FILE, TrainRunRecord)
    assert record.walk_back is not None and record.walk_back.checkpoint == "checkpoint-2"


def _banded_prompts(tmp_path: Path) -> Path:
    rows = arith_rows(8)
    for i, row in enumerate(rows):
        row["band"] = "medium" if i % 2 else "hard"
    return write_jsonl(tmp_path / "banded.jsonl", rows)


def _grpo(scorer: str, **kw: Any) -> TrainSettings:
    return TrainSettings(
        method="grpo",
        steps=kw.pop("steps", 10),
        batch_size=2,
        grpo={"group_size": 4, "max_completion_length": 4, "scorer": scorer},
        lora={"r": 4, "alpha": 8},
        learning_rate=1e-3,
        seed=0,
        **kw,
    )


COMPLETIONS = 2 * 4  # batch_size × group_size: rewards scored per step


def test_a_collapse_abort_walks_back_to_before_the_collapse(
    tiny_model: Path, tmp_path: Path
) -> None:
    # steps 1-4: rewards 0/1 alternate within each group (spread); from step 5 on all 0
    scorer = use_script(lambda n: float(n % 2) if n < 4 * COMPLETIONS else 0.0)
    s = _grpo(
        scorer,
        checkpoint={"every": 1, "keep": 10},
        health={"on_collapse": "abort", "collapse_window": 3},
    )
    out = train(tiny_model, _banded_prompts(tmp_path), tmp_path / "a", s, progress=False)
    record = read_record(out / SETTINGS_FILE, TrainRunRecord)
    w = record.walk_back
    assert w is not None and (w.checkpoint, w.ended_step) == ("checkpoint-4", 7)
    assert "stopped at step 7" in w.reason and "on_collapse: abort" in w.reason
    # the collapsed step's checkpoint was never saved: the newest passed over is step 6's
    assert [x.split(":")[0] for x in w.skipped] == ["checkpoint-6", "checkpoint-5"]
    assert all("inside the collapse that began at step 5" in x for x in w.skipped)
    log = read_jsonl(out / "metrics.jsonl")
    assert [r["step"] for r in log] == list(range(1, 8))
    # the GRPO diagnostics TRL logs, under our names; two prompts a step, by band
    assert {"entropy", "clip_ratio", "completion_length", "frac_zero_spread"} <= set(log[0])
    assert all(r["band_hard"] + r["band_medium"] == 2 for r in log)
    assert all(r["band_easy"] == 0 for r in log)
    assert sum(record.prompts_by_band.values()) == 2 * 4  # up to the published step
    assert record.prompts_by_band["easy"] == 0


def test_a_reward_drop_walks_back_where_the_reward_held(tiny_model: Path, tmp_path: Path) -> None:
    # each group keeps a spread; the mean falls from 0.75 (steps 1-4) to 0.25 (5-8)
    def reward(n: int) -> float:
        high = n < 4 * COMPLETIONS
        return (1.0 if n % 2 else 0.5) if high else (0.5 if n % 2 else 0.0)

    s = _grpo(
        use_script(reward),
        steps=8,
        checkpoint={"every": 2, "keep": 4},
        health={"collapse_window": 2, "reward_drop": 0.3},
    )
    out = train(tiny_model, _banded_prompts(tmp_path), tmp_path / "a", s, progress=False)
    record = read_record(out / SETTINGS_FILE, TrainRunRecord)
    w = record.walk_back
    assert w is not None and (w.checkpoint, w.step, w.ended_step) == ("checkpoint-4", 4, 8)
    assert w.reason.startswith("training (grpo) ended at step 8 unhealthy: the mean reward")
    assert "reward 0.75 ≥ start 0.75 − reward_drop 0.3" in w.checks
    assert record.stop == "steps" and record.steps_done == 8  # it ran to its end
    assert record.prompts_by_band == {"easy": 0, "hard": 4, "medium": 4, "unknown": 0}


def test_with_no_healthy_checkpoint_the_phase_fails_as_before(
    tiny_model: Path, tmp_path: Path
) -> None:
    use_script(lambda n: 0.0)  # collapsed from the first step
    s = _grpo(
        "test_scripted",
        checkpoint={"every": 1, "keep": 5},
        health={"on_collapse": "abort", "collapse_window": 3},
    )
    out = tmp_path / "a"
    with pytest.raises(PhaseFailed) as e:
        train(tiny_model, _banded_prompts(tmp_path), out, s, progress=False)
    message = str(e.value)
    assert message.startswith("training (grpo) stopped at step 3: grpo: reward ≤ 0")
    assert (
        "no checkpoint passes the health checks to walk back to: checkpoint-2: inside the "
        "collapse that began at step 1; checkpoint-1: inside" in message
    )
    assert not out.exists()
    stage = tmp_path / "a.partial" / "checkpoints" / "grpo"
    assert sorted(p.name for p in stage.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]


def test_a_reward_drop_with_on_unhealthy_fail_fails(tiny_model: Path, tmp_path: Path) -> None:
    s = _grpo(
        use_script(lambda n: (1.0 if n % 2 else 0.5) if n < 2 * COMPLETIONS else float(n % 2) / 4),
        steps=4,
        health={"collapse_window": 2, "reward_drop": 0.3, "on_unhealthy": "fail"},
    )
    with pytest.raises(PhaseFailed, match=r"ended at step 4 unhealthy: .*on_unhealthy: fail"):
        train(tiny_model, _banded_prompts(tmp_path), tmp_path / "a", s, progress=False)
    assert not (tmp_path / "a").exists()
    assert not (tmp_path / "a.partial").exists()  # no checkpoint to keep: as any failed run


def test_a_record_without_a_walk_back_says_so(
    tiny_model: Path, prompts: Path, tmp_path: Path
) -> None:
    s = TrainSettings(method="sft", steps=2, batch_size=2, lora={"r": 4, "alpha": 8})
    out = train(tiny_model, prompts, tmp_path / "a", s, progress=False)
    record = read_record(out / SETTINGS_FILE, TrainRunRecord)
    assert record.schema_ == "tuneloop.train_settings/5"
    assert record.walk_back is None and record.prompts_by_band == {} and record.stop == "steps"
