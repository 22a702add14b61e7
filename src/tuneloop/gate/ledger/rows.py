"""The ledger's rows, typed — and the one place its JSON columns are decoded.

Every row the ledger hands out is one of these (or a record: `GateVerdict`, `SealedBar`,
`RoundOutcome`). The JSON columns (`record`, `descriptor`) are read back here and nowhere else
(`tests/test_raw_reads.py` fails on a `json.loads(row["record"])` outside this package), a
record through `records.parse_record`, so a changed row is an error naming the ledger, not a
KeyError in a caller.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

from tuneloop.errors import InputError
from tuneloop.gate.bar import SequenceTerm
from tuneloop.gate.ledger.rounds import Round, RoundOutcome, RoundStart
from tuneloop.gate.verdict_record import GateVerdict
from tuneloop.records import Record, canonical_json, parse_record, sha256_bytes
from tuneloop.records.base import validate_as


@dataclass(frozen=True)
class Consumption:
    """One look at a gate slice."""

    slice: str
    """The slice's name."""
    suite_revision: str
    """The suite revision the slice was drawn from."""
    items_sha256: str
    """Hash of the slice's sorted item ids."""
    n_items: int
    """Items on the slice."""
    run_id: str
    """The run that looked."""
    consumed_at: str
    """ISO-8601 UTC time of the look."""
    reuse_allowed: bool = False
    """True when this look was on an already consumed slice, explicitly allowed."""


class ItemLook(NamedTuple):
    """One look at one item since the last reset."""

    run_id: str
    consumed_at: str
    content_sha256: str | None = None
    """The item's content hash when it was looked at (None: recorded before ledger version
    4, so the look holds for the id whatever the content)."""
    suite_revision: str = ""
    """The suite revision it was looked at under."""


@dataclass(frozen=True)
class ItemChange:
    """A consumed item id whose content changed, declared a new item (`suite.item_changes:
    new`, or `tuneloop ledger renew`)."""

    item_id: str
    old_sha256: str | None
    """The content hash of its earlier look (None: an old look without one)."""
    new_sha256: str
    suite_revision: str
    """The revision it is new in."""
    run_id: str
    """The run whose verdict first judges the new content; "" when declared before any run
    (`tuneloop ledger renew`)."""
    declared_at: str
    reason: str


class RevisionLooks(NamedTuple):
    """How much of one suite revision has been looked at since the last reset."""

    suite_revision: str
    n_items: int
    """Distinct items looked at."""
    n_runs: int
    """Distinct runs that looked."""


@dataclass(frozen=True)
class Reset:
    """A reset of the one-look history: looks up to these row ids stop counting."""

    id: int
    reset_at: str
    who: str
    reason: str
    items_upto: int
    """Last `consumed_items` row id before the reset."""
    slices_upto: int
    """Last `consumed_slices` row id before the reset."""


@dataclass(frozen=True)
class Champion:
    """One champion version."""

    version: int
    run_id: str | None
    """The run that produced it (None: bootstrap or registered outside a run)."""
    promoted_at: str
    via: str
    """`gate`, `approval`, `bootstrap` or `registered`."""
    descriptor: dict[str, Any]
    """What it is (`gate.champion.ChampionDescriptor`'s fields), as recorded."""

    def to_json(self) -> dict[str, Any]:
        """version, run_id, promoted_at, via, descriptor (`tuneloop champion --json`)."""
        return asdict(self)


@dataclass(frozen=True)
class Approval:
    run_id: str
    approved_at: str
    champion_version: int


@dataclass(frozen=True)
class SpendApproval:
    """A portfolio round's spend, approved: by a person (`tuneloop approve KEY --config`) or
    by a standing approval it fitted under (`how` says which, with the limits)."""

    spend_key: str
    approved_at: str
    how: str


@dataclass(frozen=True)
class Promotable:
    """A run's challenger in its final place, verified, once its run finished."""

    run_id: str
    descriptor: dict[str, Any]
    recorded_at: str


SELECTION_SEAL, COMPOSITION_SEAL = ":selection", ":composition"
RULE_SEALS = (SELECTION_SEAL, COMPOSITION_SEAL)
"""The seal-id suffixes of what is sealed beside a round's bar: a portfolio round's selection
rule (`<run id>:selection`), a cascade round's composition (`<run id>:composition`)."""


@dataclass(frozen=True)
class AlphaSpend:
    """The α one round of a sequence rule spent (`gate.sequence`; table `alpha_spent`),
    written with its sealed bar (or, for `tuneloop gate` without a seal, with its verdict)."""

    seal_id: str
    """The round's seal id (its run id)."""
    k: int
    """Its place in the sequence, 1-based."""
    rule: str
    """`alpha_spending` or `lord`."""
    alpha: float
    """α_k, the α its bar was sealed at."""
    total_alpha: float
    """The whole sequence's α."""
    bar_sha256: str
    """The hash of its bar (the verdict that judged it has the same)."""
    spent_at: str
    """ISO-8601 UTC time it was sealed (the α counts as spent from then, decided or not)."""
    term: SequenceTerm
    """Its place in the sequence as sealed in the bar."""


class SealedBar(Record):
    """The pre-registered bar of one round, as stored before its post evaluation began.

    Written to the ledger and to `eval_post/sealed_bar.json` (`tuneloop.gate.seal`).
    """

    KIND = "sealed_bar"
    VERSION = 1

    seal_id: str
    """The round (run id) the bar was sealed for."""
    bar: dict[str, object]
    """The bar's fields."""
    bar_sha256: str
    """Hash of the bar's canonical JSON."""
    slice: str
    """The gate slice's name."""
    items_sha256: str
    """Hash of the slice's sorted item ids."""
    n_items: int
    """Items on the slice."""
    sealed_at: str
    """ISO-8601 UTC time the seal was written (before the post evaluation started)."""

    @property
    def is_bar(self) -> bool:
        """A round's bar (seal id: the run id), not a rule sealed beside one (`RULE_SEALS`)."""
        return not self.seal_id.endswith(RULE_SEALS)

    def seal_sha256(self) -> str:
        """Hash of what was pre-registered: bar, slice and items (not the time)."""
        what = {"bar": self.bar_sha256, "slice": self.slice, "items": self.items_sha256}
        return sha256_bytes(canonical_json(what).encode())


# ---- decoding ---------------------------------------------------------------------------------


def read_consumption(row: sqlite3.Row) -> Consumption:
    return Consumption(
        row["slice"],
        row["suite_revision"],
        row["items_sha256"],
        row["n_items"],
        row["run_id"],
        row["consumed_at"],
        bool(row["reuse_allowed"]),
    )


def read_item_change(row: sqlite3.Row) -> ItemChange:
    return ItemChange(
        row["item_id"],
        row["old_sha256"],
        row["new_sha256"],
        row["suite_revision"],
        row["run_id"],
        row["declared_at"],
        row["reason"],
    )


def read_reset(row: sqlite3.Row) -> Reset:
    return Reset(
        row["id"],
        row["reset_at"],
        row["who"],
        row["reason"],
        row["items_upto"],
        row["slices_upto"],
    )


def read_champion(row: sqlite3.Row, where: str) -> Champion:
    descriptor = _object(row, "descriptor", f"{where}: champion v{row['version']}")
    return Champion(row["version"], row["run_id"], row["promoted_at"], row["via"], descriptor)


def read_approval(row: sqlite3.Row) -> Approval:
    return Approval(row["run_id"], row["approved_at"], row["champion_version"])


def read_promotable(row: sqlite3.Row, where: str) -> Promotable:
    descriptor = _object(row, "descriptor", f"{where}: promotable {row['run_id']!r}")
    return Promotable(row["run_id"], descriptor, row["recorded_at"])


def read_verdict(row: sqlite3.Row, where: str) -> GateVerdict:
    """A `verdicts.record`; `where` names the ledger."""
    at = f"{where} (run {row['run_id']})"
    return parse_record(_object(row, "record", at), GateVerdict, at)


def read_sealed_bar(row: sqlite3.Row, where: str) -> SealedBar:
    """A `sealed_bars.record` (its `sealed_at` column is the time of record)."""
    at = f"{where} (seal {row['seal_id']})"
    return parse_record(
        {**_object(row, "record", at), "sealed_at": row["sealed_at"]}, SealedBar, at
    )


def read_alpha_spend(row: sqlite3.Row, where: str) -> AlphaSpend:
    at = f"{where}: alpha spent by {row['seal_id']!r}"
    term = validate_as(SequenceTerm, _object(row, "record", at), at)
    return AlphaSpend(
        row["seal_id"],
        row["k"],
        row["rule"],
        row["alpha"],
        row["total_alpha"],
        row["bar_sha256"],
        row["spent_at"],
        term,
    )


def read_round_start(row: sqlite3.Row, where: str) -> RoundStart:
    at = f"{where}: round {row['round_id']!r}"
    return validate_as(RoundStart, _object(row, "record", at), at)


def read_round_outcome(row: sqlite3.Row, where: str) -> RoundOutcome:
    """A `round_outcomes.record`; one written before it was a record is version 1."""
    at = f"{where}: round {row['round_id']!r}"
    data = {"schema": RoundOutcome.schema_id(), **_object(row, "record", at)}
    return parse_record(data, RoundOutcome, at)


def read_round(start: sqlite3.Row, outcomes: list[sqlite3.Row], where: str) -> Round:
    return Round(read_round_start(start, where), [read_round_outcome(o, where) for o in outcomes])


def _object(row: sqlite3.Row, column: str, where: str) -> dict[str, Any]:
    """The JSON object in `column`; InputError naming `where` when it is not one."""
    try:
        data = json.loads(row[column])
    except json.JSONDecodeError as err:
        raise InputError(f"{where}: {column} is not valid JSON ({err.msg})") from None
    if not isinstance(data, dict):
        raise InputError(f"{where}: {column} is a JSON {type(data).__name__}, not an object")
    return data
