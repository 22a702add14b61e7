"""Checkpoint folders, TrainingArguments for `train.checkpoint`, and metrics trimming."""

from __future__ import annotations

from pathlib import Path

from tuneloop.config.health import CheckpointConfig
from tuneloop.records import append_jsonl, read_jsonl
from tuneloop.train.resume import (
    any_checkpoint,
    checkpoint_args,
    last_checkpoint,
    stage_dir,
    trim_metrics,
)


def test_checkpoint_args() -> None:
    assert checkpoint_args(CheckpointConfig()) == {"save_strategy": "no"}
    assert checkpoint_args(CheckpointConfig(every=5, keep=3)) == {
        "save_strategy": "steps",
        "save_steps": 5,
        "save_total_limit": 3,
    }


def test_last_checkpoint_is_the_newest_complete_one(tmp_path: Path) -> None:
    stage = stage_dir(tmp_path, "grpo")
    assert last_checkpoint(stage) is None and not any_checkpoint(tmp_path)
    for step in (2, 10, 4):
        (stage / f"checkpoint-{step}").mkdir(parents=True)
        (stage / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
    (stage / "checkpoint-12").mkdir()  # killed while saving: no trainer_state.json yet
    (stage / "README.md").write_text("")
    assert last_checkpoint(stage) == stage / "checkpoint-10"
    assert any_checkpoint(tmp_path)


def test_trim_metrics_drops_what_a_killed_run_logged_after_its_checkpoint(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.jsonl"
    rows = [{"phase": "sft_warmup", "step": s} for s in (1, 2)]
    rows += [{"phase": "grpo", "step": s} for s in (1, 2, 3, 4, 5)]
    append_jsonl(path, rows)
    with path.open("a") as fh:
        fh.write('{"phase": "grpo", "st')  # torn by the kill
    assert trim_metrics(path, "grpo", 3) == 2
    assert [(r["phase"], r["step"]) for r in read_jsonl(path)] == [
        ("sft_warmup", 1),
        ("sft_warmup", 2),
        ("grpo", 1),
        ("grpo", 2),
        ("grpo", 3),
    ]
    assert trim_metrics(tmp_path / "absent.jsonl", "grpo", 1) == 0
