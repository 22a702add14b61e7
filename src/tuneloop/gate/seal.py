"""Pre-registration, sealed: the bar is fixed in the ledger before the post evaluation starts.

`seal_bar` runs at the start of the challenger's evaluation (in the loop: the first thing the
`eval_post` phase does). It stores the bar, the gate slice's name and the hash of its item
ids in the ledger under a seal id (the round's run id), and returns the `SealedBar` record the
phase keeps in its folder. Sealing the same bar again is a no-op (a resumed evaluation); a
different bar under the same seal id is refused — the challenger's numbers may already exist.

Under a sequence rule (`gate.sequence`) the bar carries the round's α_k and its place in the
sequence, and sealing it records the α it spends (`tuneloop.gate.sequence`), refusing a bar
that would overspend.

`check_seal` is what the gate runs before deciding: the bar it is handed — its cost condition
(`gate.cost`) included, when it sets one — must hash to the one sealed, for the same slice and
items, and the seal must be in the ledger (a seal file whose twin is not in the ledger was not
made by this ledger's run). A verdict judged against any other bar is refused, so moving the
margin (or a cost limit) after seeing the report cannot change a decision.

`seal_selection` does the same for a portfolio round's selection rule (`<run id>:selection`),
as the first act of its `challengers` phase, before any challenger trains; `seal_composition`
for a cascade round's composed choice (`<run id>:composition`), before its post arm.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuneloop.errors import InputError
from tuneloop.gate.bar import Bar, SequenceTerm
from tuneloop.gate.ledger import (
    COMPOSITION_SEAL,
    SELECTION_SEAL,
    Ledger,
    SealedBar,
    open_ledger,
)
from tuneloop.gate.sequence import spend_alpha
from tuneloop.records import canonical_json, sha256_bytes
from tuneloop.samplelog import items_sha256

SEAL_FILE = "sealed_bar.json"


def seal_bar(
    ledger_path: Path, seal_id: str, bar: Bar, slice_name: str, item_ids: list[str], at: str
) -> SealedBar:
    """Store the bar under `seal_id` (idempotent for the same bar); refuse a different one.

    Under a sequence rule (`bar.sequence`) the α it spends is recorded in the same
    transaction (`tuneloop.gate.sequence.spend_alpha`), which refuses an overspend first."""
    record = _sealed(seal_id, bar.to_dict(), slice_name, item_ids, at, digest=bar.sha256())
    with open_ledger(ledger_path) as ledger, ledger.transaction():
        previous = ledger.sealed(seal_id)
        if previous is None:
            spend_alpha(ledger, seal_id, bar, at)
            ledger.seal(record)
            return record
    if previous.seal_sha256() != record.seal_sha256():
        raise InputError(
            f"the bar of round {seal_id!r} was sealed at {previous.sealed_at} "
            f"({_describe(previous)}); the config now asks for {_describe(record)}. "
            "A bar cannot change once the post evaluation has started: restore the sealed "
            "bar, or start a new round with `tuneloop run CONFIG --from eval_post`, which "
            "needs a gate slice no verdict has looked at"
        )
    return previous


def selection_seal_id(run_id: str) -> str:
    """The seal id of a round's selection rule (beside its bar's, the run id itself)."""
    return run_id + SELECTION_SEAL


def selection_sha256(rule: dict[str, Any]) -> str:
    """The hash a selection rule is sealed under (its canonical JSON's)."""
    return sha256_bytes(canonical_json(rule).encode())


def seal_selection(
    ledger_path: Path,
    run_id: str,
    rule: dict[str, Any],
    slice_name: str,
    item_ids: list[str],
    at: str,
) -> SealedBar:
    """Seal a portfolio round's selection rule before any challenger is evaluated: the rule,
    the challengers it chooses among (names and overrides) and the adjudication mode, in
    `rule`, hashed like a bar (`sealed_bars`, seal id `<run id>:selection`). The same rule
    again is a no-op (a resumed round); another one is refused — a challenger may already
    have a number."""
    record = _sealed(selection_seal_id(run_id), rule, slice_name, item_ids, at)
    previous = _store(ledger_path, record)
    if previous.seal_sha256() != record.seal_sha256():
        raise InputError(
            f"the selection rule of round {run_id!r} was sealed at {previous.sealed_at}, "
            f"before any challenger was evaluated (rule {previous.bar_sha256[:12]} on slice "
            f"{previous.slice!r}, {previous.n_items} items); the config now asks for rule "
            f"{record.bar_sha256[:12]} on slice {record.slice!r}. A selection rule cannot "
            "change once challengers may have numbers: restore portfolio.selection and the "
            "challengers, or start a new round (`tuneloop run CONFIG --from challengers`)"
        )
    return previous


def composition_seal_id(run_id: str) -> str:
    """The seal id of a cascade round's composition (`loop.cascade`)."""
    return run_id + COMPOSITION_SEAL


def seal_composition(
    ledger_path: Path,
    run_id: str,
    choice: dict[str, Any],
    slice_name: str,
    item_ids: list[str],
    at: str,
) -> SealedBar:
    """Seal a cascade round's composition before its post arm is evaluated: the rule
    (objective, budget, ε, signal, tiers and prices), the hash of each tier's validation log,
    the chosen setting and the descriptor's hash, in `choice`, hashed like a bar (seal id
    `<run id>:composition`). The same choice again is a no-op (a resumed round); another one
    is refused — the cascade the gate may already have numbers for was that one."""
    record = _sealed(composition_seal_id(run_id), choice, slice_name, item_ids, at)
    previous = _store(ledger_path, record)
    if previous.seal_sha256() != record.seal_sha256():
        raise InputError(
            f"the cascade of round {run_id!r} was composed and sealed at {previous.sealed_at} "
            f"(choice {previous.bar_sha256[:12]} on slice {previous.slice!r}); this "
            f"composition chose {record.bar_sha256[:12]}. A sealed composition cannot be "
            "replaced once the post arm may have numbers: start a new round (`tuneloop run "
            "CONFIG --from compose` needs a gate slice no verdict has looked at)"
        )
    return previous


def _sealed(
    seal_id: str,
    what: dict[str, Any],
    slice_name: str,
    item_ids: list[str],
    at: str,
    digest: str | None = None,
) -> SealedBar:
    """A seal of `what` (a bar with its own `digest`, or a rule or choice hashed as its
    canonical JSON) on the slice's items."""
    return SealedBar(
        seal_id=seal_id,
        bar=what,
        bar_sha256=digest if digest is not None else selection_sha256(what),
        slice=slice_name,
        items_sha256=items_sha256(item_ids),
        n_items=len(item_ids),
        sealed_at=at,
    )


def _store(ledger_path: Path, record: SealedBar) -> SealedBar:
    """The seal stored under `record.seal_id`: `record`, unless one was there already."""
    with open_ledger(ledger_path) as ledger, ledger.transaction():
        previous = ledger.sealed(record.seal_id)
        if previous is None:
            ledger.seal(record)
            return record
    return previous


def check_seal(
    sealed: SealedBar, bar: Bar, slice_name: str, item_ids: list[str], ledger: Ledger
) -> None:
    """Refuse to judge against anything but the sealed bar, slice and items."""
    stored = ledger.sealed(sealed.seal_id)
    if stored is None or stored.bar_sha256 != sealed.bar_sha256:
        raise InputError(
            f"the sealed bar of round {sealed.seal_id!r} is not in {ledger.path}; the post "
            "evaluation was not pre-registered in this ledger — redo it with "
            "`tuneloop run CONFIG --from eval_post`"
        )
    asked = _sealed(
        sealed.seal_id,
        bar.to_dict(),
        slice_name,
        item_ids,
        sealed.sealed_at,
        digest=bar.sha256(),
    )
    if asked.seal_sha256() != sealed.seal_sha256():
        raise InputError(
            f"the gate was asked to judge against {_describe(asked)}, but the bar sealed at "
            f"{sealed.sealed_at} before the post evaluation was {_describe(sealed)}; a verdict "
            "against another bar is refused (pre-registration). Restore the sealed gate "
            "settings, or start a new round with `--from eval_post` on a fresh slice"
        )


def _describe(s: SealedBar) -> str:
    b = s.bar
    limits = b.get("cost")
    cost = ""
    if isinstance(limits, dict):
        cost = "".join(f", cost {key} {value}" for key, value in sorted(limits.items()))
    term = b.get("sequence")
    sequence = ""
    if isinstance(term, dict):
        t = SequenceTerm.model_validate(term)
        sequence = f", round {t.k} of the sequence ({t.describe()})"
    return (
        f"slice {s.slice!r} ({s.n_items} items), metric {b.get('metric')}, k {b.get('k')}, "
        f"margin {b.get('margin')}, alpha {b.get('alpha')}, test {b.get('test')}, "
        f"non-inferiority ε {b.get('non_inferiority_epsilon')}, min_items {b.get('min_items')}"
        f"{cost}{sequence}"
    )
