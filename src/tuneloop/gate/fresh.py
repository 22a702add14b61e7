"""The standalone gate's side of one look per item: narrow a slice to its fresh items, and
record changed items as new ones on purpose (`tuneloop ledger renew`).

    ids, dropped = fresh_items(ledger, slice_name, suite, ids, logs, changes_are_new, min_items)
    renewed = renew_items(ledger, suite, ["add-1d-0001"], who, "fixed the reference's typo")

`fresh_items` is what the loop's gate does before any phase (`tuneloop.loop.integrity`), for
`tuneloop gate`: it judges only the slice's fresh items, and refuses — with the same message,
`tuneloop.gate.looks.refusal` — a slice with none fresh, with fewer fresh than `min_items`
while some are consumed, or with an item changed under a consumed id not declared new. A
re-run on the same two logs keeps the items its stored verdict judged (the same look again,
answered with that verdict).

`renew_items` is the one-item, on-the-record counterpart of `suite.item_changes: new`: each
listed item must be in the suite, consumed, and changed since its look; the change (old and
new content hash, who, why) is appended to the ledger's `item_changes` table and to
EXPERIMENT-LOG.md, and from then on that item with exactly that content is fresh — any other
change still refused. Nothing else is released: `tuneloop ledger reset` stays the only way
to look at consumed items again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tuneloop.errors import InputError
from tuneloop.gate.explog import append_entry, log_path
from tuneloop.gate.ledger import ItemChange, ItemLook, Ledger, open_ledger
from tuneloop.gate.looks import COMMAND_ADVICE, SliceLooks, classify, name_ids, refusal
from tuneloop.samplelog import log_sha256
from tuneloop.suite import Suite


@dataclass(frozen=True)
class Narrowed:
    """The slice's items a standalone gate judges."""

    ids: list[str]
    """Fresh (and, declared new, changed) items, in the slice's order."""
    status: SliceLooks | None
    """The slice by one-look status (None: no ledger yet, every item fresh)."""

    def note(self) -> str | None:
        """What was left out, for the user; None when nothing was."""
        if self.status is None or len(self.ids) == len(self.status.order):
            return None
        left = len(self.status.order) - len(self.ids)
        return (
            f"judging {len(self.ids)} of the slice's {len(self.status.order)} items: {left} "
            "already looked at are left out (one look per item)"
        )


def fresh_items(
    ledger_path: Path,
    slice_name: str,
    suite: Suite,
    ids: list[str],
    logs: tuple[Path, Path],
    changes_are_new: bool,
    min_items: int,
) -> Narrowed:
    """The items of `ids` a gate may judge, or `InputError` (the loop's refusal; see module)."""
    if not ledger_path.exists():  # no look yet; a refusal must not create the file
        return Narrowed(list(ids), None)
    hashes = {i.id: i.content_sha256 for i in suite.items}
    with open_ledger(ledger_path) as ledger:
        own = _run_on_these_logs(ledger, logs)
        status = classify(
            {i: hashes.get(i) for i in ids},
            ledger.item_looks(ids, except_run=own),
            ledger.renewed_items(ids),
        )
    where = f"slice {slice_name!r} (suite revision {suite.revision[:12]})"
    problem = refusal(
        status,
        where=where,
        ledger=ledger_path,
        suite=str(suite.path),
        changes_are_new=changes_are_new,
        min_items=min_items,
        advice=COMMAND_ADVICE,
    )
    if problem:
        option, message = problem
        raise InputError(f"{option}: {message}")
    return Narrowed(status.judgeable(changes_are_new), status)


def _run_on_these_logs(ledger: Ledger, logs: tuple[Path, Path]) -> str | None:
    """The run whose verdict judged exactly these two logs (its items stay its own), if any."""
    hashes = (log_sha256(logs[0]), log_sha256(logs[1]))
    for verdict in ledger.verdicts():
        ev = verdict.evidence
        if ev is not None and (ev.champion_log_sha256, ev.challenger_log_sha256) == hashes:
            return verdict.run_id
    return None


def renew_items(
    ledger_path: Path, suite: Suite, item_ids: list[str], who: str, reason: str, at: str
) -> list[ItemChange]:
    """Declare each changed item of `item_ids` a new item (see module); refuses the whole
    call, writing nothing, when one is not in the suite, not consumed, or not changed."""
    if not reason.strip():
        raise InputError("--reason: a renewal needs a reason; it goes into the experiment log")
    if not item_ids:
        raise InputError("--item: name at least one changed item to renew")
    if not ledger_path.is_file():
        raise InputError(
            f"{ledger_path}: no ledger here; nothing was looked at, so nothing to renew"
        )
    by_id = suite.by_id()
    unknown = [i for i in item_ids if i not in by_id]
    if unknown:
        raise InputError(f"--item: not in {suite.path}: {name_ids(unknown)}")
    ids = list(dict.fromkeys(item_ids))
    with open_ledger(ledger_path) as ledger, ledger.transaction():
        looks = ledger.item_looks(ids)
        status = classify(
            {i: by_id[i].content_sha256 for i in ids}, looks, ledger.renewed_items(ids)
        )
        _refuse_unchanged(status, looks, ledger_path)
        changes = [
            ItemChange(
                i,
                status.changed[i].content_sha256,
                by_id[i].content_sha256,
                suite.revision,
                "",
                at,
                f"{reason} (declared by {who} with `tuneloop ledger renew`)",
            )
            for i in ids
        ]
        ledger.add_item_changes(changes)
    append_entry(log_path(ledger_path), f"renew {at} {' '.join(ids)}", renew_entry(changes))
    return changes


def _refuse_unchanged(
    status: SliceLooks, looks: dict[str, list[ItemLook]], ledger_path: Path
) -> None:
    fresh = [i for i in status.order if i in status.fresh]
    never = [i for i in fresh if i not in looks]
    if never:
        raise InputError(
            f"--item: not consumed since the last reset of {ledger_path}: {name_ids(never)}; "
            "a fresh item needs no renewal"
        )
    if fresh:
        raise InputError(
            f"--item: already renewed to its content now: {name_ids(fresh)}; nothing to record"
        )
    if status.consumed:
        same = sorted(status.consumed)
        by_id_only = [i for i in same if status.consumed[i].content_sha256 is None]
        why = (
            "looked at before ledger version 4, by id alone, so its content cannot be "
            "compared; give it a new id instead"
            if by_id_only == same
            else "its content is the one a verdict already looked at; change it first, or "
            "give it a new id"
        )
        raise InputError(f"--item: not changed: {name_ids(same)} ({why})")


def renew_entry(changes: list[ItemChange]) -> str:
    """The EXPERIMENT-LOG entry of a renewal."""
    first = changes[0]
    lines = [
        f"## {first.declared_at} — {len(changes)} changed item(s) renewed as new items",
        "",
        f"- Reason: {first.reason}",
        f"- Suite revision: {first.suite_revision[:12]}",
        "- Only this content of each item is new; any other change is still refused.",
    ]
    for c in changes:
        lines.append(f"- `{c.item_id}`: content {(c.old_sha256 or '-')[:12]} → {c.new_sha256[:12]}")
    return "\n".join(lines) + "\n"
