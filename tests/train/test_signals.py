"""The health signals of a training log: non-finite values, collapse, the reward drop."""

from __future__ import annotations

import math

from tuneloop.train.signals import (
    COLLAPSE_WINDOW,
    collapse_onset,
    collapse_warning,
    nonfinite,
    reward_at,
    reward_drop,
    reward_start,
)


def grpo_rows(rewards: list[float], spread: float = 1.0) -> list[dict]:
    return [
        {"step": i + 1, "phase": "grpo", "reward_mean": r, "frac_zero_spread": spread}
        for i, r in enumerate(rewards)
    ]


def test_nonfinite_names_bad_loss_and_grad_norm() -> None:
    assert nonfinite({"loss": 1.0, "grad_norm": 0.5, "kl": math.nan}) == []
    assert nonfinite({"loss": math.nan, "grad_norm": math.inf}) == ["loss=nan", "grad_norm=inf"]


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


def test_the_collapse_began_where_its_first_full_window_began() -> None:
    # zero reward for 2 steps (too short), recovers, then from step 6 on for good
    rows = grpo_rows([0.5, 0.0, 0.0, 0.4, 0.3, 0.0, 0.0, 0.0, 0.0])
    assert collapse_onset(rows, 3) == 6
    assert collapse_onset(rows, 5) is None  # the window never filled
    assert collapse_onset(rows[:7], 3) is None  # not yet seen at step 7
    # the earliest of the signals wins; a later collapse does not move it
    kl = [{**r, "kl": 0.9 if r["step"] >= 2 else 0.0} for r in rows]
    assert collapse_onset(kl, 3, max_kl=0.5) == 2
    assert collapse_onset([{"step": 1, "loss": 1.0}], 1) is None  # SFT: no reward, no collapse


def test_the_reward_is_compared_over_windows() -> None:
    rows = grpo_rows([0.6, 0.8, 0.7, 0.5, 0.3, 0.1, 0.2])
    assert reward_start(rows, 3) == (0.6 + 0.8 + 0.7) / 3
    assert math.isclose(reward_at(rows, 5, 3) or 0, (0.7 + 0.5 + 0.3) / 3)
    assert reward_at(rows, 1, 3) == 0.6  # a window not yet full: the rows there are
    message = reward_drop(rows, 3, 0.2)
    assert message is not None and "fell below its start" in message and "0.2" in message
    assert reward_drop(rows, 3, 0.6) is None  # dropped by 0.5, less than allowed
    assert reward_drop(grpo_rows([0.1, 0.2, 0.3, 0.4]), 2, 0.01) is None  # rising
    # one bad step does not end a run unhealthy: the windows are means
    assert reward_drop(grpo_rows([0.5] * 6 + [0.0]), 3, 0.2) is None
    assert reward_drop([{"step": 1, "loss": 1.0}], 3, 0.1) is None
