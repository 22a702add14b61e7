"""The train phase's `metrics.jsonl`: one row per logged step, read typed.

The rows carry no `schema` field (they are written per step by `train/metrics.py`, one
fsynced line each, in the shape TRL logs plus our names), so they are not a `Record`; this
model checks the fields the readers rely on (`step`, `phase`, numbers) and keeps every other
numeric value under its original key. Errors name the file and line. `band_totals` sums the
prompts seen per difficulty band (the `band_<name>` columns), for the run record and the report.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from tuneloop.errors import InputError
from tuneloop.records.disk import iter_jsonl

METRICS_FILE = "metrics.jsonl"


class TrainMetricsRow(BaseModel):
    """One logged training step."""

    model_config = ConfigDict(extra="allow")

    step: int
    """The optimizer step the row was logged at."""
    phase: str = "train"
    """The training stage that logged it (`sft`, `grpo`, `dpo`, a composite stage)."""

    def values(self) -> dict[str, float]:
        """Every numeric quantity of the row (loss, reward_mean, learning_rate, …) by name."""
        extra = self.model_extra or {}
        return {
            k: float(v)
            for k, v in extra.items()
            if isinstance(v, int | float) and not isinstance(v, bool)
        }


def read_train_metrics(path: Path) -> list[TrainMetricsRow]:
    """Every row of a metrics.jsonl, in file order."""
    rows = []
    for lineno, obj in iter_jsonl(path):
        try:
            rows.append(TrainMetricsRow.model_validate(obj))
        except ValidationError as err:
            first = err.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            raise InputError(f"{path}:{lineno}: field {loc!r}: {first['msg']}") from None
    return rows


BAND_PREFIX = "band_"
"""metrics.jsonl's `band_<name>` columns: prompts of each difficulty band seen at that step."""


def band_totals(
    rows: Iterable[TrainMetricsRow], phase: str | None = None, through: int | None = None
) -> dict[str, int]:
    """Prompts seen per difficulty band, summed over the `band_<name>` columns of the rows (of
    `phase`, up to step `through`, when given); {} when no row counts bands."""
    totals: dict[str, float] = {}
    for row in rows:
        if (phase is not None and row.phase != phase) or (
            through is not None and row.step > through
        ):
            continue
        for key, value in row.values().items():
            if key.startswith(BAND_PREFIX) and math.isfinite(value):
                band = key.removeprefix(BAND_PREFIX)
                totals[band] = totals.get(band, 0.0) + value
    return {band: round(n) for band, n in sorted(totals.items())}
