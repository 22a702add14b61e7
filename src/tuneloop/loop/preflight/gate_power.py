"""Preflight's power warning: the gate slice's minimum detectable effect against gate.margin.

The MDE is one-sided at gate.alpha with `POWER` (Miller 2024; the formula of
`tuneloop.stats.power`), for the items the gate will actually judge: the slice's fresh ones
(one look per item, `tuneloop.loop.integrity.next_gate_items`), not the whole slice. The spread
of item differences comes from the round's own eval_pre log when it exists, else from the
conservative `ASSUMED_SD_DIFF`. `checks.preflight` runs `check_power` once the gate slice's size
is known. A gate scored by an LLM judge is powered in true pass rate: the MDE divided by the
judge's Youden J (`preflight/judge.py`).
"""

from __future__ import annotations

import math
from pathlib import Path
from statistics import NormalDist
from typing import TYPE_CHECKING

from tuneloop.errors import InputError
from tuneloop.loop.integrity import next_gate_items
from tuneloop.loop.layout import RunLayout
from tuneloop.loop.preflight.findings import Findings
from tuneloop.loop.preflight.judge import Attenuation
from tuneloop.samplelog import SUMMARY_FILE

if TYPE_CHECKING:
    from tuneloop.config import LoopConfig

POWER = 0.8
"""Power the gate's minimum detectable effect is computed for."""

ASSUMED_SD_DIFF = math.sqrt(0.5)
"""sd of a paired difference of two independent Bernoulli(0.5) item scores (√0.5 ≈ 0.707):
the largest spread two independent pass/fail arms can have, used when there is no pilot."""


def _sd_diff(cfg: LoopConfig) -> tuple[float, str]:
    """(sd of item differences, where it came from): the eval_pre pilot, else the assumption."""
    return pilot_spread(RunLayout(cfg.workdir).eval_pre, cfg.gate.metric)


def pilot_spread(pilot: Path | None, metric: str) -> tuple[float, str]:
    """(sd of item differences, where it came from) from one pilot sample log — a champion's
    per-item scores, with the second model assumed as spread and correlated ρ = 0.5
    (`report.power.pilot_sd_diff`) — else the conservative `ASSUMED_SD_DIFF`."""
    note = f"no pilot log in {pilot}" if pilot is not None else "no pilot log yet"
    if metric != "mean":
        note = "the pilot log gives mean item scores, not pass@k"
    elif pilot is not None and (pilot / SUMMARY_FILE).is_file():
        from tuneloop.report.power import pilot_sd_diff
        from tuneloop.samplelog import load_sample_log

        try:
            n, sd, how = pilot_sd_diff([load_sample_log(pilot)], correlation=0.5)
        except InputError as err:
            note = f"the pilot log {pilot} is unusable: {err}"
        else:
            if sd > 0:
                return sd, f"pilot {pilot} ({n} items); {how}"
            note = f"the pilot log {pilot} has no spread in item scores"
    return ASSUMED_SD_DIFF, (
        "assumed: two independent Bernoulli(0.5) item scores, the largest spread of two "
        f"independent pass/fail arms ({note})"
    )


def _z_sum(alpha: float, power: float) -> float:
    normal = NormalDist()
    return normal.inv_cdf(1 - alpha) + normal.inv_cdf(power)


def gate_mde(n_items: int, sd_diff: float, alpha: float, power: float = POWER) -> float:
    """One-sided minimum detectable effect: `tuneloop.stats.min_detectable_effect(...,
    two_sided=False)` (Miller 2024) with the normal quantiles of the standard library, because
    importing `tuneloop.stats` loads scipy and doubles `check`'s wall time. The preflight tests
    hold the two equal."""
    return _z_sum(alpha, power) * sd_diff / math.sqrt(n_items)


def gate_items_needed(effect: float, sd_diff: float, alpha: float, power: float = POWER) -> int:
    """Items for a one-sided test to detect `effect` (> 0): `tuneloop.stats.items_needed`."""
    return max(1, math.ceil((_z_sum(alpha, power) * sd_diff / effect) ** 2))


def check_power(cfg: LoopConfig, n: int, found: Findings, judge: Attenuation | None = None) -> None:
    """Warn when the items the gate will judge — the fresh ones of its `n`-item slice — are
    too few to detect an improvement of gate.margin; with an LLM judge's calibration
    (`judge`), in true pass rate: the MDE as the judge scores, divided by its J."""
    g = cfg.gate
    try:
        fresh = len(next_gate_items(cfg))
    except InputError:  # an unreadable suite or ledger: their own checks report it
        fresh = n
    if fresh == 0:
        found.warn(
            "gate.slice",
            f"the gate slice {g.slice!r} has {n} items, 0 fresh of {n}: verdicts in the ledger "
            "already looked at them, so a run that has to decide again is refused before any "
            "phase. Add items with new ids to the suite (the gate judges only those)",
        )
        return
    if g.allow_slice_reuse:
        judged = f"has {n} items, all judged (gate.allow_slice_reuse)"
    elif fresh == n:
        judged = f"has {n} items, all fresh"
    else:
        judged = f"has {n} items, and the gate judges only the fresh ones, {fresh} of {n}"
    alpha = _round_alpha(cfg, found)
    if alpha is None:
        return
    sd, source = _sd_diff(cfg)
    j = 1.0 if judge is None else judge.j
    mde = gate_mde(fresh, sd, alpha) / j if j > 0 else math.inf
    if mde <= g.margin:
        return
    if j <= 0:
        advice = "The judge's J ≤ 0: it cannot show any difference; calibrate a better judge"
    elif g.margin > 0:
        need = gate_items_needed(g.margin * j, sd, alpha)
        advice = f"Detecting Δ = margin needs {need} gate items{_suite_size(cfg, need, fresh, n)}"
    else:
        advice = (
            "Margin 0 counts any improvement, and no slice size detects every one; set "
            "gate.margin to the smallest improvement worth shipping"
        )
    found.warn(
        "gate.margin",
        f"the gate slice {g.slice!r} {judged}: at "
        f"one-sided alpha {alpha:.3g} with {POWER:.0%} power the minimum "
        f"detectable effect is Δ = {mde:.3f}, above the margin {g.margin:g}; a true "
        "improvement between the two will most often be rejected as not significant. "
        f"{advice}. sd of item differences {sd:.3f}, {source}"
        + ("" if judge is None else f"; Δ in true pass rate through {judge.source}"),
    )


def _round_alpha(cfg: LoopConfig, found: Findings) -> float | None:
    """The α this run's bar will carry: `gate.alpha`, or under `gate.sequence` the next
    round's α_k (an error, and None, when the sequence would refuse the round)."""
    if cfg.gate.sequence is None:
        return cfg.gate.alpha
    from tuneloop.gate.sequence import alpha_budget  # scipy: only for a sequence
    from tuneloop.loop.layout import ledger_path

    budget = alpha_budget(cfg.gate, ledger_path(cfg))
    if budget.refusal or budget.next_alpha <= 0:
        found.error("gate.sequence", budget.refusal or "the sequence's α is spent")
        return None
    return budget.next_alpha


def _suite_size(cfg: LoopConfig, need: int, fresh: int, n: int) -> str:
    """How large the suite should be for `need` gate items, or how many new items it needs."""
    fraction = cfg.suite.slices.get(cfg.gate.slice)
    key = f"suite.slices.{cfg.gate.slice}"
    if not fraction:
        return " (suite.rolling.gate_size)"
    if fresh < n:
        more = math.ceil((need - fresh) / fraction)
        return f" (about {more} items with new ids added to the suite at {key} = {fraction:g})"
    return f" (a suite of about {math.ceil(need / fraction)} at {key} = {fraction:g})"
