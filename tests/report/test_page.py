"""What report.html shows, gathered without a browser: training curves from metrics.jsonl."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuneloop.errors import InputError
from tuneloop.records import append_jsonl
from tuneloop.records.train_metrics import read_train_metrics
from tuneloop.report.page import training_charts


def test_training_charts_one_per_quantity_and_stage(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    rows = [{"step": s, "phase": "sft", "loss": 1.0 / s, "learning_rate": 1e-3} for s in (1, 2)]
    rows += [{"step": 3, "phase": "grpo", "loss": 0.2, "reward_mean": 0.5, "note": "x"}]
    append_jsonl(path, rows)
    charts = training_charts(path)
    assert [c.title for c in charts] == [
        "loss (3 points)",
        "reward_mean (1 points)",
        "learning_rate (2 points)",
    ]
    assert "sft" in charts[0].svg and "grpo" in charts[0].svg  # two stages, one legend
    assert read_train_metrics(path)[2].values() == {"loss": 0.2, "reward_mean": 0.5}


def test_a_bad_metrics_row_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    append_jsonl(path, [{"step": 1, "loss": 1.0}, {"loss": 2.0}])
    with pytest.raises(InputError, match=r"metrics.jsonl:2: field 'step'"):
        read_train_metrics(path)
