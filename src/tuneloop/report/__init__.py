"""The report phase: the paired delta report of two sample logs.

    tuneloop compare PRE_LOG POST_LOG --out DIR   # delta.json, delta.md, passk.png, items.png
    tuneloop power --pilot LOG [--effect 0.03]    # items needed, or the MDE

From Python (the loop's report phase): `compare(pre_log, post_log, out_dir, ...)` reads and
writes files; `compute_delta((summary, rows), (summary, rows), ...)` is the pure core. Both
are imported lazily so that importing this package (e.g. for the CLI's help) stays cheap.
Statistics come from `tuneloop.stats`; this package only lays out data and writes files.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tuneloop.report.delta import Log
    from tuneloop.report.record import DeltaReport

__all__ = ["DeltaReport", "compare", "compute_delta"]


def compare(
    pre_log: Path,
    post_log: Path,
    out_dir: Path,
    *,
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    permutation_resamples: int = 10_000,
    seed: int = 0,
    item_ids: Sequence[str] | None = None,
    figures: bool = True,
) -> DeltaReport:
    """Compare two sample logs and write delta.json, delta.md and figures to `out_dir`."""
    from tuneloop.report.compare import compare as _compare

    return _compare(
        pre_log,
        post_log,
        out_dir,
        confidence=confidence,
        n_resamples=n_resamples,
        permutation_resamples=permutation_resamples,
        seed=seed,
        item_ids=item_ids,
        figures=figures,
    )


def compute_delta(
    pre: Log,
    post: Log,
    *,
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    permutation_resamples: int = 10_000,
    seed: int = 0,
    item_ids: Sequence[str] | None = None,
) -> DeltaReport:
    """The delta report of two loaded sample logs (pure)."""
    from tuneloop.report.delta import compute_delta as _compute

    return _compute(
        pre,
        post,
        confidence=confidence,
        n_resamples=n_resamples,
        permutation_resamples=permutation_resamples,
        seed=seed,
        item_ids=item_ids,
    )


def __getattr__(name: str) -> Any:
    if name == "DeltaReport":
        from tuneloop.report.record import DeltaReport

        return DeltaReport
    raise AttributeError(name)
