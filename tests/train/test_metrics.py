"""metrics.jsonl rows: TRL's names for the quantities we read become ours, the rest stay."""

from __future__ import annotations

from tuneloop.train.metrics import metrics_row


def test_metrics_row_renames_trl_keys_and_keeps_the_rest() -> None:
    row = metrics_row({"reward": 0.5, "frac_reward_zero_std": 0.25, "x": 3, "s": "a"}, 7, 0.1, "g")
    assert row == {
        "step": 7,
        "phase": "g",
        "reward_mean": 0.5,
        "frac_zero_spread": 0.25,
        "x": 3.0,
        "step_time_s": 0.1,
    }


def test_the_grpo_diagnostics_get_stable_names() -> None:
    """The keys TRL 1.16's GRPOTrainer logs (grpo_trainer.py) under the names report.html reads."""
    logs = {
        "reward_std": 0.3,
        "kl": 0.01,
        "entropy": 1.2,
        "clip_ratio/region_mean": 0.05,
        "clip_ratio/low_mean": 0.02,
        "completions/mean_length": 11.5,
        "completions/max_length": 16.0,
        "band_medium": 2.0,
        "num_tokens": None,  # TRL logs None for a metric with no valid value
    }
    row = metrics_row(logs, 3, None, "grpo")
    assert row == {
        "step": 3,
        "phase": "grpo",
        "reward_std": 0.3,
        "kl": 0.01,
        "entropy": 1.2,
        "clip_ratio": 0.05,
        "clip_ratio/low_mean": 0.02,
        "completion_length": 11.5,
        "completions/max_length": 16.0,
        "band_medium": 2.0,
    }
    assert metrics_row({"cispo_clip_ratio": 0.1}, 1, None, "grpo")["clip_ratio"] == 0.1


def test_a_budgeted_bar_counts_steps_and_time_not_a_remaining_time(tmp_path) -> None:
    from types import SimpleNamespace

    from tuneloop.train.metrics import MetricsCallback

    state = SimpleNamespace(is_world_process_zero=True, max_steps=100_000, global_step=0)
    totals = {}
    for budget in (None, 120.0):
        bar = MetricsCallback(tmp_path / "m.jsonl", phase="grpo")
        bar.budget_s = budget
        bar.on_train_begin(None, state, None)
        totals[budget] = bar._progress.tasks[0].total
        bar.on_train_end(None, state, None)
    # steps bound the run: a fraction of them; a budget bounds it: no fraction of 100,000 steps
    assert totals == {None: 100_000, 120.0: None}
