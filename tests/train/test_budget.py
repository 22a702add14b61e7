"""`train.max_seconds`: every TRL method stops on the clock and records why (budget.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import arith_rows, write_jsonl

from tuneloop.errors import InputError
from tuneloop.records import read_record
from tuneloop.train.budget import BudgetCallback, RunBudget, run_outcome
from tuneloop.train.run import train
from tuneloop.train.settings import TrainRunRecord, TrainSettings

MANY = 100_000
"""A step count no test reaches: only the budget can end these runs."""


def _settings(method: str, **update: object) -> TrainSettings:
    return TrainSettings(
        method=method,
        steps=MANY,
        batch_size=2,
        grpo={"group_size": 2, "max_completion_length": 4, "scorer": "numeric"},
        lora={"r": 4, "alpha": 8},
        **update,  # type: ignore[arg-type]
    )


def _pairs(tmp_path: Path) -> Path:
    rows = [
        {"prompt": r["messages"], "chosen": r["answer"], "rejected": str(int(r["answer"]) + 1)}
        for r in arith_rows(4)
    ]
    return write_jsonl(tmp_path / "pairs.jsonl", rows)


@pytest.mark.parametrize("method", ["sft", "dpo", "grpo", "composite"])
def test_each_method_stops_on_the_clock_and_records_it(
    method: str, tiny_model: Path, prompts: Path, tmp_path: Path
) -> None:
    data, extra = prompts, {}
    if method == "dpo":
        data = _pairs(tmp_path)
    if method == "composite":
        extra = {"composite": {"alpha": 0.5, "beta": 0.5, "pairs": str(_pairs(tmp_path))}}
    s = _settings(method, max_seconds=1.5, **extra)
    out = train(tiny_model, data, tmp_path / "out", s, progress=False)
    assert (out / "adapter_model.safetensors").is_file()  # a budget stop is a normal end
    rec = read_record(out / "train_settings.json", TrainRunRecord)
    assert rec.stop == "max_seconds"
    assert rec.steps_done is not None and 1 <= rec.steps_done < MANY
    assert rec.train_seconds is not None and 1.5 <= rec.train_seconds < 30
    # loading the model is not counted: the call took longer than the training clock
    assert rec.seconds > rec.train_seconds
    budget = read_record(out / "budget.json", RunBudget)
    assert budget.max_seconds == 1.5 and budget.stages[-1].stage == method


def test_without_a_budget_the_steps_end_it(tiny_model: Path, prompts: Path, tmp_path: Path) -> None:
    s = _settings("sft").model_copy(update={"steps": 3})
    out = train(tiny_model, prompts, tmp_path / "out", s, progress=False)
    rec = read_record(out / "train_settings.json", TrainRunRecord)
    assert (rec.stop, rec.steps_done) == ("steps", 3)


def test_the_budget_covers_warmup_and_grpo_together(
    tiny_model: Path, prompts: Path, tmp_path: Path
) -> None:
    s = _settings("grpo", max_seconds=1.0, sft_warmup_steps=MANY)
    out = train(tiny_model, prompts, tmp_path / "out", s, progress=False)
    stages = read_record(out / "budget.json", RunBudget).stages
    assert [b.stage for b in stages] == ["sft_warmup", "grpo"]
    assert all(b.stop == "max_seconds" for b in stages)
    assert stages[1].steps_done == 1  # the clock was already spent: one step, then stop
    assert run_outcome(out)["stop"] == "max_seconds"


def test_the_callback_stops_only_once_spent(tmp_path: Path) -> None:
    cb = BudgetCallback(60.0, stage="sft", run_dir=tmp_path)
    control, state = SimpleNamespace(should_training_stop=False), SimpleNamespace()
    cb.on_step_begin(None, state, control)
    cb.on_step_end(None, state, control)
    assert not control.should_training_stop
    cb.max_seconds = 1e-9
    cb.on_step_end(None, state, control)
    assert control.should_training_stop and cb.stopped


def test_diloco_refuses_a_budget(tiny_model: Path, prompts: Path, tmp_path: Path) -> None:
    s = _settings("sft", max_seconds=5.0, diloco={"replicas": 2})
    with pytest.raises(InputError, match="max_seconds"):
        train(tiny_model, prompts, tmp_path / "out", s, progress=False)
