"""The gate power warning's formula (`loop/preflight/gate_power.py`): written with the standard
library's normal quantiles so that `tuneloop check` never loads scipy, and held equal here to
`tuneloop.stats`. The warning itself, through `tuneloop check`: `test_checks.py`; that it
counts only the gate slice's fresh items: below."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tuneloop.config import load_config
from tuneloop.loop.layout import slice_ids
from tuneloop.loop.preflight import POWER, gate_items_needed, gate_mde

from ...installed import tuneloop
from .. import fakeloop
from ..fakeloop import runner, write_config


@pytest.mark.parametrize("n, sd, alpha", [(10, 0.707, 0.05), (164, 0.5, 0.01), (1000, 0.3, 0.2)])
def test_gate_power_formula_is_the_stats_one(n: int, sd: float, alpha: float) -> None:
    from tuneloop.stats import items_needed, min_detectable_effect

    expected = min_detectable_effect(n, sd, alpha, POWER, two_sided=False)
    assert gate_mde(n, sd, alpha) == pytest.approx(expected, rel=1e-12)
    for effect in (0.01, 0.02, 0.1, 0.3):
        want = items_needed(effect, sd, alpha, POWER, two_sided=False)
        assert gate_items_needed(effect, sd, alpha) == want


# ---- the warning counts the items the gate will judge: the fresh ones (issue 25) -------------

EXAMPLE = Path(__file__).parents[3] / "examples" / "arith"


def promoted(tmp: Path) -> Path:
    """The fake loop after one promoting round: its gate slice is consumed."""
    config = write_config(tmp, train={"data": str(EXAMPLE / "train_prompts.jsonl")})
    runner(config).run()
    fakeloop.CALLS.clear()
    return config


def test_the_power_warning_counts_only_fresh_gate_items(tmp_path: Path) -> None:
    config = promoted(tmp_path)
    first = set(slice_ids(load_config(config), "gate"))
    suite = tmp_path / "suite.jsonl"
    with suite.open("a") as fh:
        for i in range(40):
            row = {"id": f"new{i:03d}", "prompt": f"What is {i} + 2?", "answer": str(i + 2)}
            fh.write(json.dumps(row) + "\n")
    gate = slice_ids(load_config(config), "gate")
    fresh = len(set(gate) - first)
    ran = tuneloop("check", config)
    assert ran.code == 0, ran.output
    assert f"the gate slice 'gate' has {len(gate)} items" in ran.stderr
    assert f"only the fresh ones, {fresh} of {len(gate)}: at" in ran.stderr
    found = re.search(r"Δ = ([\d.]+), .* sd of item differences ([\d.]+)", ran.stderr)
    assert found, ran.stderr
    mde, sd = float(found.group(1)), float(found.group(2))
    assert mde == pytest.approx(gate_mde(fresh, sd, 0.05), abs=2e-3)  # fresh items, not all
    assert mde > gate_mde(len(gate), sd, 0.05) + 0.01


def test_a_consumed_gate_slice_is_warned_about_at_check(tmp_path: Path) -> None:
    config = promoted(tmp_path)
    n = len(slice_ids(load_config(config), "gate"))
    ran = tuneloop("check", config)
    assert ran.code == 0 and "Traceback" not in ran.output, ran.output
    assert (
        f"warning: gate.slice (default): the gate slice 'gate' has {n} items, 0 fresh of {n}"
        in (ran.stderr)
    )


def test_under_a_sequence_the_warning_uses_the_rounds_alpha_and_check_refuses_a_spent_one(
    tmp_path: Path,
) -> None:
    """Issue 32: the MDE `check` warns with is at the α the run's bar will carry (α_k under
    gate.sequence), and a sequence whose α is spent is an error before any round."""
    from tuneloop.stats.sequence import spending_alpha

    data = {"data": str(EXAMPLE / "train_prompts.jsonl")}
    config = write_config(tmp_path, gate={"sequence": "alpha_spending"}, train=data)
    ran = tuneloop("check", config)
    assert ran.code == 0, ran.output
    alpha = spending_alpha(1, 0.05)
    assert f"one-sided alpha {alpha:.3g} with 80% power" in ran.stderr
    spent = {"sequence": {"rule": "alpha_spending", "series": "uniform", "horizon": 1}}
    config = write_config(tmp_path, gate=spent, train=data)
    runner(config).run()  # round 1 of 1 spends the whole α
    fakeloop.CALLS.clear()
    ran = tuneloop("check", config, "gate.slice=dev")
    assert ran.code == 2 and "Traceback" not in ran.output, ran.output
    assert "gate.sequence" in ran.stderr and "spent" in ran.stderr
