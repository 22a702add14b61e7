"""A cascade's composition: every threshold's accuracy and cost, each tier alone, the choice.

A core record, so that the report and the experiment log read what the `compose` phase wrote
without importing it (docs/design.md, §3), as they read a portfolio round's
`records.selection.PortfolioRecord`.

- `CompositionRecord` (`tuneloop.composition/1`; `/2` with calibration maps): the tiers
  alone (accuracy and dollars per item on the validation items), the frontier (each
  setting's thresholds, accuracy, cost and share of items each tier answered), the declared
  objective and the setting it chose, with its reason, the sealed hash and the chosen cascade
  as a champion descriptor. Written by `tuneloop.cascade.compose` (`tuneloop compose --out`,
  and a cascade round's `compose/composition.json`).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from tuneloop.records.base import Record

Signal = Literal["mean_logprob", "min_margin", "agreement"]
Objective = Literal["max_accuracy_under_cost", "min_cost_non_inferior"]


class _Row(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Point(_Row):
    thresholds: list[float]
    accuracy: float
    cost: float
    """Mean dollars per item."""
    coverage: list[float]


class TierFigures(_Row):
    name: str
    log: str
    log_sha256: str
    model: str
    usd_per_1m: float
    accuracy: float
    cost: float
    """Mean dollars per item when this tier answers everything alone."""


class CompositionRecord(Record):
    KIND: ClassVar[str] = "composition"
    VERSION: ClassVar[int] = 2

    signal: Signal
    objective: Objective
    budget: float | None
    epsilon: float
    n_items: int
    item_ids_sha256: str
    tiers: list[TierFigures]
    frontier: list[Point]
    chosen: Point | None
    """The setting the objective picks; None when none meets it."""
    chosen_sha256: str | None
    """sha256 of the chosen thresholds with the signal, tiers (names, logs' hashes, prices)
    and objective: what a descriptor records as sealed."""
    reason: str
    calibration: list[dict[str, list[float]] | None] | None = None
    """With `calibrate`: each tier's isotonic map ({x, y}: signal → P(correct)) fitted on
    these items — thresholds and the frontier are then in calibrated units; None for the last
    tier, which hands nothing off. None without calibration (and then not written)."""
    descriptor: dict[str, Any] | None
    """The chosen cascade as a champion descriptor (`kind: cascade`, its tiers in order with
    their model, endpoint, price, signal and hand-off threshold, and `composition_sha256`);
    None when nothing was chosen."""

    def to_json(self) -> dict[str, Any]:
        out = super().to_json()
        if self.calibration is None:  # version 1 without it: older readers still read it
            del out["calibration"]
            out["schema"] = "tuneloop.composition/1"
        return out
