"""The gate ledger: consumed items, sealed bars, verdicts, champions, approvals, rounds and the
α each round of a sequence rule spent (`alpha_spent`).

    with open_ledger(path) as ledger:
        champion = ledger.current_champion()      # a typed row (or None)

One SQLite file (WAL journal, so readers never block the writer), opened in one place and
read back only as typed rows: a `Champion`, a `GateVerdict`, a `SealedBar`, a `Round` with
its `RoundOutcome`s, ….

- `queries`: `open_ledger`, `Ledger` (every read and write), `last_outcome` of a round;
- `rows`: the typed rows, and the one place the JSON columns are decoded;
- `rounds`: a round's start row and the `RoundOutcome` record of each of its ends;
- `store`: the file — schema, versions, upgrades (`tuneloop.records.sqlite` opens it).

Code outside this package imports from here; the modules import their siblings directly.
"""

from tuneloop.gate.ledger.queries import Ledger, last_outcome, open_ledger
from tuneloop.gate.ledger.rounds import (
    AuditFigures,
    GateFigures,
    Recipe,
    Round,
    RoundEnd,
    RoundOutcome,
    RoundStart,
)
from tuneloop.gate.ledger.rows import (
    COMPOSITION_SEAL,
    RULE_SEALS,
    SELECTION_SEAL,
    AlphaSpend,
    Approval,
    Champion,
    Consumption,
    ItemChange,
    ItemLook,
    Promotable,
    Reset,
    RevisionLooks,
    SealedBar,
    SpendApproval,
)
from tuneloop.gate.ledger.store import SCHEMA_VERSION

__all__ = [
    "COMPOSITION_SEAL",
    "RULE_SEALS",
    "SCHEMA_VERSION",
    "SELECTION_SEAL",
    "AlphaSpend",
    "Approval",
    "AuditFigures",
    "Champion",
    "Consumption",
    "GateFigures",
    "ItemChange",
    "ItemLook",
    "Ledger",
    "Promotable",
    "Recipe",
    "Reset",
    "RevisionLooks",
    "Round",
    "RoundEnd",
    "RoundOutcome",
    "RoundStart",
    "SealedBar",
    "SpendApproval",
    "last_outcome",
    "open_ledger",
]
