"""Load the champion's and the challenger's sample logs and align them on the gate slice.

The two logs must be comparable before any statistic is computed: the same suite revision,
the same sampling budget (samples per item, temperature, top_p, max_tokens, seed), and both
must have evaluated every item of the slice. Any difference is refused with an `InputError`
that names it. Items outside the slice are ignored (a log may cover the whole suite).
(item, sample) keys the log lacks, and rows that are missing or a harness error, count as
unscored: score 0 in the statistics and in the arm's missing fraction (docs/design.md:
infrastructure failure is never a model outcome, and what is still missing counts against the
arm). Each arm also carries its items' costs (`gate.cost`), judged only when the bar sets one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tuneloop.errors import InputError
from tuneloop.gate.cost import ItemCosts, item_costs
from tuneloop.samplelog import (
    SAMPLING_BUDGET,
    EvalSummary,
    SampleRow,
    check_comparable,
    load_sample_log,
    score_grid,
)

SAMPLING_FIELDS = (*SAMPLING_BUDGET, "seed")
"""The gate also requires the same base seed: the comparison was pre-registered as one pair."""


@dataclass(frozen=True)
class Arm:
    """One side of the comparison, aligned to the slice's item order."""

    log: Path
    """The sample-log folder."""
    summary: EvalSummary
    """The log's summary record."""
    scores: np.ndarray
    """(items × samples) sample scores, unscored = 0."""
    unscored: int
    """(item, sample) keys on the slice without a scored completion."""
    tags: tuple[tuple[str, ...], ...]
    """Each slice item's tags, as the log recorded them."""
    costs: ItemCosts
    """Each slice item's mean `cost_usd` (what the bar's `cost` condition judges)."""

    @property
    def missing_fraction(self) -> float:
        return self.unscored / self.scores.size if self.scores.size else 0.0


def load_arms(
    champion_log: Path, challenger_log: Path, item_ids: Sequence[str], scorer: str | None = None
) -> tuple[Arm, Arm]:
    """Read both logs, refuse incomparable ones, and align them on `item_ids`; with `scorer`,
    on that scorer's output (`samplelog.rows_on_scorer`)."""
    if not item_ids:
        raise InputError("the gate slice has no items; check the slice name and fractions")
    if len(set(item_ids)) != len(item_ids):
        raise InputError("the gate slice lists an item id more than once")
    champ_summary, champ_rows = load_sample_log(Path(champion_log), scorer)
    chall_summary, chall_rows = load_sample_log(Path(challenger_log), scorer)
    labels = (str(champion_log), str(challenger_log))
    check_comparable(champ_summary, chall_summary, labels, SAMPLING_FIELDS)
    return (
        _align(Path(champion_log), champ_summary, champ_rows, item_ids),
        _align(Path(challenger_log), chall_summary, chall_rows, item_ids),
    )


def _align(log: Path, summary: EvalSummary, rows: list[SampleRow], item_ids: Sequence[str]) -> Arm:
    evaluated = set(summary.item_ids)
    absent = [i for i in item_ids if i not in evaluated]
    if absent:
        shown = ", ".join(absent[:5]) + (" …" if len(absent) > 5 else "")
        raise InputError(
            f"{log}: {len(absent)} of the slice's {len(item_ids)} items were not evaluated "
            f"({shown}); evaluate the slice with `tuneloop eval`"
        )
    grid = score_grid(rows, item_ids, summary.sampling.n_samples, str(log))
    costs = item_costs(rows, item_ids, str(log))
    return Arm(log, summary, grid.values, int((~grid.ok).sum()), grid.tags, costs)
