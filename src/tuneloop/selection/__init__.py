"""The selection phase: one arm chosen among several sample logs of the same items, by a rule
fixed before any result exists (`config.portfolio.SelectionConfig`: `default_stays` or
`best_mean`).

    tuneloop select LOG_A LOG_B [NAME=LOG …] --default LOG_A --out decision.json

From Python (a portfolio round's choice on its validation slice): `compare_logs(arms, rule,
default=, costs=, same_model=)` reads the logs and returns a `records.selection.
SelectionDecision`; `command.py` writes it. The statistics (paired advantage, exact sign
test, per-tag non-inferiority, Holm's step-down) are `tuneloop.stats.selection`'s. The face is
lazy so that importing the package for the CLI's help loads no numpy or scipy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tuneloop.lazy import lazy_exports

if TYPE_CHECKING:
    from tuneloop.selection.compare import compare_logs

__all__ = ["compare_logs"]

__getattr__ = lazy_exports(__name__, {"compare_logs": "compare"})
