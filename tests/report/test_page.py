"""What report.html shows, gathered without a browser: training curves and the GRPO
diagnostics from metrics.jsonl."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuneloop.errors import InputError
from tuneloop.records import append_jsonl
from tuneloop.records.train_health import WalkBack
from tuneloop.records.train_metrics import band_totals, read_train_metrics
from tuneloop.report.page import grpo_section, training_charts


def test_training_charts_one_per_quantity_and_stage(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    rows = [{"step": s, "phase": "sft", "loss": 1.0 / s, "learning_rate": 1e-3} for s in (1, 2)]
    rows += [{"step": 3, "phase": "grpo", "loss": 0.2, "reward_mean": 0.5, "note": "x"}]
    append_jsonl(path, rows)
    charts = training_charts(read_train_metrics(path))
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


def _grpo(step: int, **extra: float) -> dict:
    return {"step": step, "phase": "grpo", "reward_mean": 0.4, "reward_std": 0.2, **extra}


def test_grpo_diagnostics_only_for_a_log_with_rewards(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    append_jsonl(path, [{"step": 1, "phase": "sft", "loss": 1.0, "band_hard": 3}])
    assert grpo_section(read_train_metrics(path)) is None  # SFT: no RL to diagnose
    full = {"frac_zero_spread": 0.5, "entropy": 1.0, "clip_ratio": 0.1, "completion_length": 9}
    append_jsonl(
        path,
        [
            _grpo(1, **full, band_hard=1, band_medium=3, band_easy=0),
            _grpo(2, **full, band_hard=2, band_medium=2, band_easy=0),
        ],
    )
    section = grpo_section(read_train_metrics(path))
    assert section is not None
    assert [c.title for c in section.charts] == [
        "reward mean ± spread (2 points)",
        "share of groups with zero reward spread (2 points)",
        "entropy (2 points)",
        "clip ratio (2 points)",
        "completion length (tokens) (2 points)",
    ]
    assert section.absent == [
        "KL to the reference: not in the log (TRL logs it only with grpo.beta > 0)"
    ]
    assert '<polygon points="' in section.charts[0].svg  # the ± spread band
    assert 'width="360"' in section.charts[0].svg  # a small multiple
    assert 'class="zero"' not in section.charts[0].svg  # no walk-back, no mark
    walked = WalkBack(
        stage="grpo",
        checkpoint="checkpoint-1",
        step=1,
        steps=2,
        ended_step=2,
        reason="r",
        checks=[],
    )
    marked = grpo_section(read_train_metrics(path), walked)
    assert marked is not None and all("walked back" in c.svg for c in marked.charts)
    # the SFT row's band column is no GRPO prompt; the GRPO rows' are summed
    assert [(b.band, b.prompts, b.share) for b in section.bands] == [
        ("medium", 5, 5 / 8),
        ("hard", 3, 3 / 8),
        ("easy", 0, 0.0),
    ]


def test_band_totals_sum_a_stage_up_to_a_step(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    append_jsonl(
        path,
        [
            {"step": 1, "phase": "sft_warmup", "loss": 1.0},
            _grpo(1, band_hard=2.0, band_easy=0.0),
            _grpo(2, band_hard=1.0, band_easy=1.0),
            _grpo(3, band_hard=2.0),
        ],
    )
    rows = read_train_metrics(path)
    assert band_totals(rows) == {"easy": 1, "hard": 5}
    assert band_totals(rows, "grpo", through=2) == {"easy": 1, "hard": 3}
    assert band_totals(rows, "sft_warmup") == {}
