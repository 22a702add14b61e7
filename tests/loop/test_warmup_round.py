"""A round that warms up with SFT before GRPO reports what each step added (real, slow).

The demo model, a few steps of each, through the installed CLI: the train phase keeps the
warm-up's own adapter, `eval_warmup` serves it merged on the base like the arms and leaves no
merged copy behind, and the report compares base → warm-up → trained model on the report
items, the three means chaining exactly into the round's own Δ.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from .test_e2e import ARITH, tuneloop

pytestmark = pytest.mark.slow


def test_a_warm_started_round_reports_each_step(tmp_path: Path) -> None:
    rows = (ARITH / "train_prompts.jsonl").read_text().splitlines()
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("\n".join(rows[:64]) + "\n")
    cfg = {
        "name": "warm",
        "workdir": str(tmp_path / "work"),
        "base_model": str(ARITH / "model"),
        "suite": {"path": str(ARITH / "suite.jsonl"), "slices": {"dev": 0.5, "gate": 0.5}},
        "eval": {"max_tokens": 8},
        "train": {
            "method": "grpo",
            "data": str(prompts),
            "steps": 2,
            "batch_size": 4,
            "torch_threads": 1,
            "sft_warmup_steps": 3,
            "sft_warmup_data": str(ARITH / "train_prompts.jsonl"),
            "sft_warmup_batch_size": 16,
            "sft_warmup_learning_rate": 0.003,
            "grpo": {"group_size": 4, "max_completion_length": 8},
        },
        "gate": {"min_items": 50, "ledger": str(tmp_path / "ledger.db")},
        "archive": {"root": str(tmp_path / "archive")},
    }
    path = tmp_path / "loop.yaml"
    path.write_text(yaml.safe_dump(cfg))
    done = tuneloop("run", str(path))
    # 5 training steps move little: the gate may well reject (exit 1), the round is complete
    assert done.returncode in (0, 1) and "verdict:" in done.stdout, done.stderr[-3000:]
    work = tmp_path / "work"
    assert (work / "train" / "adapter" / "warmup" / "adapter_model.safetensors").is_file()
    assert not (work / "eval_warmup" / "warmup_model").exists()  # merged only while served
    summary = json.loads((work / "eval_warmup" / "summary.json").read_text())
    assert summary["served_as"]["artifact"]["kind"] == "model"

    def report(name: str) -> dict:
        return json.loads((work / "report" / name / "delta.json").read_text())

    whole = json.loads((work / "report" / "delta.json").read_text())
    warm, after = report("warmup"), report("after_warmup")
    assert warm["n_items"] == after["n_items"] == whole["n_items"] == 156  # not the gate slice
    assert warm["pre"]["mean"] == whole["pre"]["mean"]
    assert warm["post"]["mean"] == after["pre"]["mean"]
    assert after["post"]["mean"] == whole["post"]["mean"]
    capstone = (work / "capstone" / "report.md").read_text()
    assert "## What each training step added (report slice)" in capstone
    assert "| SFT warm-up (3 steps) |" in capstone and "| grpo after it |" in capstone
