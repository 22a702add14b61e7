"""One look per gate item, whatever the suite revision: which items of a slice are fresh.

    status = classify(
        {"q1": sha_now, "q2": sha_now2},
        ledger.item_looks(["q1", "q2"]),
        ledger.renewed_items(["q1", "q2"]),
    )
    status.fresh, status.consumed, status.changed
    problem = refusal(status, where="slice 'gate' (suite revision …)", ledger=db, suite=s, …)

A look belongs to the ITEM — its id and its content hash (`SuiteItem.content_sha256`:
prompt or messages, reference fields, scorer and its arguments, tools, environment; not its
tags) — never to the suite revision it was drawn from. So a new revision releases nothing by
itself: items added (new ids) are fresh, items removed stay consumed, and an item is, for
each id of a slice:

- fresh — no look at this id since the last reset;
- consumed — a look at this id with the same content, or a look recorded without a content
  hash (ledgers before version 4: those stay consumed by id, whatever the content now);
- changed — looked at only under other content. Refused by default (a reference silently
  changed under a consumed id is how a holdout leaks); a new item only when the user says so:
  for every changed item with `suite.item_changes: new` (`tuneloop gate --item-changes new`),
  the change recorded with the verdict that first judges it; or for the listed items and
  exactly their new content with `tuneloop ledger renew` (a reason, recorded in the ledger
  and the experiment log before any run) — such an item is fresh.

`refusal` words the one refusal both the loop (before any phase) and the standalone `tuneloop
gate` give; `Advice` says how each names its settings. `tuneloop ledger reset` stays the only
way to look at consumed items again. Pure: the ledger reads and writes are the callers'
(`loop.integrity`, `gate.verdict`, `gate.command`, `gate.renew`, `loop.rounds.lineage`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from tuneloop.gate.ledger import ItemLook


@dataclass(frozen=True)
class SliceLooks:
    """A slice's items by their one-look status, each list in the slice's order."""

    fresh: list[str]
    """Never looked at since the last reset."""
    consumed: dict[str, ItemLook]
    """Looked at with this content (or by id alone): id → its first such look."""
    changed: dict[str, ItemLook]
    """Looked at only under other content: id → its first look."""
    order: tuple[str, ...] = ()
    """Every id of the slice, in its order."""

    def judgeable(self, changes_are_new: bool) -> list[str]:
        """The items a gate may judge: the fresh ones, and the changed ones when declared new."""
        if not changes_are_new:
            return list(self.fresh)
        return [i for i in self.order if i not in self.consumed]


def classify(
    items: Mapping[str, str | None],
    looks: Mapping[str, list[ItemLook]],
    renewed: Mapping[str, Collection[str]] | None = None,
) -> SliceLooks:
    """Fresh, consumed and changed items of `items` (id → content hash now, in slice order;
    None: unknown, so any look consumes it) given `looks` (id → looks since the last reset)
    and `renewed` (id → the new content hashes declared new items: such an item, changed to
    one of them and not yet looked at under it, is fresh)."""
    renewed = renewed or {}
    fresh: list[str] = []
    consumed: dict[str, ItemLook] = {}
    changed: dict[str, ItemLook] = {}
    for item_id, sha in items.items():
        seen = looks.get(item_id, [])
        if not seen:
            fresh.append(item_id)
            continue
        same = [x for x in seen if sha is None or x.content_sha256 in (None, sha)]
        if same:
            consumed[item_id] = same[0]
        elif sha is not None and sha in renewed.get(item_id, ()):
            fresh.append(item_id)
        else:
            changed[item_id] = seen[0]
    return SliceLooks(fresh, consumed, changed, tuple(items))


def counts(status: SliceLooks) -> str:
    """'N fresh, M already looked at, K changed under a consumed id' for messages."""
    text = f"{len(status.fresh)} fresh, {len(status.consumed)} already looked at"
    if status.changed:
        text += f", {len(status.changed)} changed under a consumed id"
    return text


def name_ids(ids: list[str], most: int = 10) -> str:
    """Up to `most` ids, then how many more."""
    shown = ", ".join(ids[:most])
    return shown + (f" and {len(ids) - most} more" if len(ids) > most else "")


@dataclass(frozen=True)
class Advice:
    """How a refusal names the caller's settings: loop.yaml keys (the default), or options."""

    slice: str = "gate.slice"
    item_changes: str = "suite.item_changes"
    declare_new: str = "`suite.item_changes: new`"
    min_items: str = "gate.min_items"
    stage: str = "before any phase ran"
    """When the refusal happens, said in the message."""


COMMAND_ADVICE = Advice(
    slice="--slice",
    item_changes="--item-changes",
    declare_new="`--item-changes new`",
    min_items="min_items (--bar)",
    stage="nothing was written",
)
"""`tuneloop gate`'s spelling of the same settings."""


def refusal(
    status: SliceLooks,
    *,
    where: str,
    ledger: Path,
    suite: str,
    changes_are_new: bool,
    min_items: int,
    advice: Advice = Advice(),
) -> tuple[str, str] | None:
    """(the setting to name, the message) when a gate may not judge this slice — an item
    changed under a consumed id not declared new, no fresh item, or fewer fresh items than
    `min_items` while some are consumed (a whole slice below it is the rule's reject) — else
    None. `where` names the slice and revision: "slice 'gate' (suite revision 6e91677b…)";
    `ledger` and `suite` (the suite's path, with `--default-scorer NAME` when it is not the
    default) go into the commands the message suggests."""
    if status.changed and not changes_are_new:
        return advice.item_changes, changed_message(status, where, ledger, suite, advice)
    fresh = status.judgeable(changes_are_new)
    looked = status.consumed
    if not fresh:
        runs = sorted({look.run_id for look in looked.values()})
        return advice.slice, (
            f"none of the {len(status.order)} items of {where} is fresh ({counts(status)}): "
            f"a verdict in {ledger} (runs {', '.join(runs)}) already looked at them, and a gate "
            f"item is looked at once, whatever the suite revision; refused {advice.stage}. To "
            "decide again, add items with new ids to the suite (the gate judges only those), "
            f"or reset the one-look history on purpose with `tuneloop ledger reset {ledger} "
            "--reason '...'` (recorded in the experiment log)"
        )
    if looked and len(fresh) < min_items:
        return advice.min_items, (
            f"the gate would judge only the {len(fresh)} fresh items of {where} "
            f"({counts(status)}), fewer than {advice.min_items} {min_items}, so it could only "
            f"reject; refused {advice.stage}. Add items with new ids to the suite, or lower "
            f"{advice.min_items}"
        )
    return None


def changed_message(
    status: SliceLooks, where: str, ledger: Path, suite: str, advice: Advice
) -> str:
    """Why items changed under a consumed id are refused, and the three ways on."""
    ids = sorted(status.changed)
    items = " ".join(f"--item {i}" for i in ids) if len(ids) <= 3 else "--item ID …"
    return (
        f"{len(ids)} item(s) of {where} changed content under an id a verdict in {ledger} "
        f"already looked at: {name_ids(ids)}. A changed reference under a consumed id is how a "
        f"holdout leaks; refused {advice.stage}. Restore their content, give them new ids, "
        f"declare every such change new with {advice.declare_new}, or record these changes as "
        f"new items with a reason: `tuneloop ledger renew {ledger} --suite {suite} {items} "
        "--reason '...'` (each recorded in the ledger and the experiment log)"
    )
