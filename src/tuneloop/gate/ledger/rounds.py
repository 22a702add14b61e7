"""The ledger's rounds: one start row per flywheel round, one outcome row per end (append-only).

A flywheel round (docs/design.md: "the flywheel repeats rounds around the served champion")
is one run of the loop from a parent champion on a fresh gate slice. Its start row holds its
lineage (parent champion version and descriptor, gate slice, trigger); each time it ends —
promoted, rejected, refused before training, failed or interrupted and later resumed — an
outcome row is appended, so the history of a round that was interrupted and resumed keeps
both. The latest outcome is the round's state.

`RoundOutcome` is the record of one end. `loop.rounds.outcome` builds it from the round's
artifacts; it is defined here, beside the ledger that stores and reads it, because the gate
(a phase) does not import the loop. `RoundStart` is the start row as the loop writes it: the
round's `round.json` (`loop.rounds.RoundRecord`), or — for a round refused before it was
planned — only its id, time, empty gate slice and trigger.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from tuneloop.records import Record

RoundEnd = Literal[
    "promoted", "finished", "rejected", "awaiting_approval", "refused", "failed", "interrupted"
]
"""How a round can end (`loop.rounds.TERMINAL` are the ones `--round next` does not resume)."""


class RoundStart(BaseModel):
    """A round's start row: `round.json`'s fields, or the few a refused round has.

    Stored exactly as given (`Ledger.add_round` writes the fields that were set), so a start
    row reads back as it was written.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    round_id: str
    """`r0001`, `r0002`, … in the order rounds were started."""
    started_at: str
    """ISO-8601 UTC time the round was planned (or refused)."""
    gate_slice: str
    """The rolling gate slice the round's gate looks at once; "" when refused before planning."""
    parent_version: int | None = None
    """The champion version the round starts from."""
    parent: dict[str, Any] | None = None
    """That champion's descriptor."""
    bootstrap: bool = False
    """True when the parent is the bootstrap champion (a null baseline, not a won decision)."""
    base_model: str | None = None
    """The base checkpoint's folder."""
    eval_slice: str | None = None
    """What both arms are evaluated on: `audit+gate-NNN`."""
    config_path: str | None = None
    """The config the round was run from."""
    trigger: dict[str, Any] = {}
    """Why the round ran (the watcher's trigger record), or {} for a manual round."""
    schema_: str | None = None
    """`round.json`'s schema id, when the row is a `RoundRecord` (written by `model_dump`,
    hence the field name)."""

    @classmethod
    def of(cls, record: BaseModel) -> RoundStart:
        """The start row of a round planned as `record` (`loop.rounds.RoundRecord`)."""
        return cls.model_validate(record.model_dump(mode="json"))


class Recipe(BaseModel):
    """How the round's challenger was trained (from `train_settings.json`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: str
    steps: int | None
    learning_rate: float | None
    batch_size: int | None
    lora_r: int | None
    data_rows: int


class AuditFigures(BaseModel):
    """The round's report on the audit part (`report/delta.json`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n_items: int
    pre: float
    """Champion mean item score."""
    post: float
    """Challenger mean item score."""
    delta: float
    ci: tuple[float, float]
    """Paired bootstrap CI of Δ."""
    p_two_sided: float


class GateFigures(BaseModel):
    """The round's gate verdict (`gate/verdict.json`), in brief."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    decision: str
    reasons: list[str]
    """Every failed condition, in words (empty: all passed)."""
    delta: float | None
    p_value: float | None
    """One-sided."""
    n_items: int | None


class RoundOutcome(Record):
    """One end of a round, as appended to the ledger (and summed up in EXPERIMENT-LOG.md).

    Rows written before this was a record carry no `schema`; they are read as version 1.
    """

    KIND = "round_outcome"
    VERSION = 1

    round_id: str
    ended_at: str
    """ISO-8601 UTC time of this end."""
    outcome: RoundEnd
    run_id: str | None = None
    """The round's loop run, once it has one."""
    reason: str = ""
    """Why it was refused, failed or interrupted ("" otherwise)."""
    wall_s: float = 0.0
    """Wall seconds of this attempt."""
    corpus_counts: dict[str, int] | None = None
    """Rows after each corpus step (`data/provenance.json`), when the corpus was built."""
    recipe: Recipe | None = None
    train_seconds: float | None = None
    audit: AuditFigures | None = None
    gate: GateFigures | None = None


@dataclass(frozen=True)
class Round:
    """A round as the ledger holds it: its start and every end so far (oldest first)."""

    start: RoundStart
    outcomes: list[RoundOutcome]

    @property
    def round_id(self) -> str:
        return self.start.round_id

    @property
    def last(self) -> RoundOutcome | None:
        """The round's state: its latest outcome (None: it has not ended yet)."""
        return self.outcomes[-1] if self.outcomes else None
