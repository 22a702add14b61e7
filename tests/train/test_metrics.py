"""metrics.jsonl rows and the GRPO reward-collapse warning."""

from __future__ import annotations

from tuneloop.train.metrics import COLLAPSE_WINDOW, collapse_warning, metrics_row


def grpo_rows(rewards: list[float], spread: float = 1.0) -> list[dict]:
    return [
        {"step": i + 1, "phase": "grpo", "reward_mean": r, "frac_zero_spread": spread}
        for i, r in enumerate(rewards)
    ]


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


def test_collapse_warns_after_a_full_window_of_zero_reward() -> None:
    rows = grpo_rows([0.3] * 5 + [0.0] * COLLAPSE_WINDOW)
    message = collapse_warning(rows)
    assert message is not None
    assert f"through step {5 + COLLAPSE_WINDOW}" in message and "grpo" in message


def test_no_collapse_warning_for_a_short_or_live_run() -> None:
    assert collapse_warning(grpo_rows([0.0] * (COLLAPSE_WINDOW - 1))) is None
    # one rewarded step inside the window: the policy still learns
    assert collapse_warning(grpo_rows([0.0] * 5 + [0.1] + [0.0] * 5)) is None
    # a zero mean with spread (rewards that can be negative) is not a collapse
    assert collapse_warning(grpo_rows([0.0] * COLLAPSE_WINDOW, spread=0.9)) is None
    # SFT rows carry no reward
    assert collapse_warning([{"step": i, "loss": 1.0} for i in range(20)]) is None


def test_collapse_reads_kl_entropy_and_the_zero_std_threshold() -> None:
    rows = [
        {"step": i, "phase": "grpo", "reward_mean": 0.2, "frac_zero_spread": 0.9, "kl": 0.7}
        for i in range(4)
    ]
    assert collapse_warning(rows, 4) is None
    assert "KL > 0.5" in (collapse_warning(rows, 4, max_kl=0.5) or "")
    assert collapse_warning(rows, 4, max_kl=1.0) is None
    signal = collapse_warning(rows, 4, zero_std_fraction=0.8, reward_floor=0.25)
    assert signal is not None and "≥ 80% of groups" in signal
    low = [{**r, "entropy": 0.01} for r in rows]
    assert "entropy < 0.05" in (collapse_warning(low, 4, min_entropy=0.05) or "")
    # a row that does not log the value (beta 0 logs no KL) never shows that signal
    no_kl = [{k: v for k, v in r.items() if k != "kl"} for r in rows]
    assert collapse_warning(no_kl, 4, max_kl=0.5) is None
