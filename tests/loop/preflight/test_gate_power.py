"""The gate power warning's formula (`loop/preflight/gate_power.py`): written with the standard
library's normal quantiles so that `tuneloop check` never loads scipy, and held equal here to
`tuneloop.stats`. The warning itself, through `tuneloop check`: `test_checks.py`."""

from __future__ import annotations

import pytest

from tuneloop.loop.preflight import POWER, gate_items_needed, gate_mde


@pytest.mark.parametrize("n, sd, alpha", [(10, 0.707, 0.05), (164, 0.5, 0.01), (1000, 0.3, 0.2)])
def test_gate_power_formula_is_the_stats_one(n: int, sd: float, alpha: float) -> None:
    from tuneloop.stats import items_needed, min_detectable_effect

    expected = min_detectable_effect(n, sd, alpha, POWER, two_sided=False)
    assert gate_mde(n, sd, alpha) == pytest.approx(expected, rel=1e-12)
    for effect in (0.01, 0.02, 0.1, 0.3):
        want = items_needed(effect, sd, alpha, POWER, two_sided=False)
        assert gate_items_needed(effect, sd, alpha) == want
