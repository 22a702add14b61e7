"""plan_power: sd of differences measured from two pilots or assumed from one."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tuneloop import stats
from tuneloop.errors import InputError
from tuneloop.report.power import plan_power
from tuneloop.samplelog import load_sample_log

Make = Callable[..., Path]


def test_two_pilots_measure_sd_diff(make_log: Make) -> None:
    a = {f"q{i}": [float(i % 2), 1.0] for i in range(20)}
    b = {f"q{i}": [float(i % 3 == 0), 1.0] for i in range(20)}
    pa, pb = load_sample_log(make_log(a)), load_sample_log(make_log(b))
    d = np.array([np.mean(b[k]) - np.mean(a[k]) for k in a])
    plan = plan_power([pa, pb], effect=0.05)
    assert plan.sd_diff == pytest.approx(float(np.std(d, ddof=1)))
    assert plan.items_needed == stats.items_needed(0.05, plan.sd_diff)
    assert plan.mde == pytest.approx(stats.min_detectable_effect(20, plan.sd_diff))


def test_one_pilot_assumes_a_correlation(make_log: Make) -> None:
    scores = {f"q{i}": [float(i % 2), float(i % 4 == 0)] for i in range(16)}
    pilot = load_sample_log(make_log(scores))
    sd = float(np.std([np.mean(v) for v in scores.values()], ddof=1))
    assert plan_power([pilot]).sd_diff == pytest.approx(sd)  # ρ = 0.5
    assert plan_power([pilot], correlation=0.0).sd_diff == pytest.approx(sd * math.sqrt(2))
    assert plan_power([pilot], correlation=0.9).mde < plan_power([pilot]).mde
    assert plan_power([pilot]).items_needed is None


def test_power_rejects_bad_input(make_log: Make) -> None:
    pilot = load_sample_log(make_log({"a": [1.0], "b": [0.0]}))
    tiny = load_sample_log(make_log({"a": [1.0]}))
    refused: list[dict[str, float]] = [
        {"effect": 0.0},
        {"effect": -0.1},
        {"effect": 5.0},
        {"effect": 1.0001},
        {"effect": math.nan},
        {"effect": math.inf},
        {"alpha": 2.0},
        {"alpha": math.nan},
        {"power": math.nan},
        {"correlation": 1.0},
        {"correlation": math.nan},
    ]
    for kwargs in refused:
        with pytest.raises(InputError):
            plan_power([pilot], **kwargs)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="at least 2"):
        plan_power([tiny])
    with pytest.raises(InputError, match="one or two"):
        plan_power([])


def test_an_effect_of_a_whole_score_is_accepted(make_log: Make) -> None:
    pilot = load_sample_log(make_log({"a": [1.0], "b": [0.0], "c": [1.0]}))
    assert plan_power([pilot], effect=1.0).items_needed is not None
