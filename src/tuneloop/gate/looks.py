"""One look per gate item, whatever the suite revision: which items of a slice are fresh.

    status = classify({"q1": sha_now, "q2": sha_now2}, ledger.item_looks(["q1", "q2"]))
    status.fresh, status.consumed, status.changed

A look belongs to the ITEM — its id and its content hash (`SuiteItem.content_sha256`:
prompt or messages, reference fields, scorer and its arguments, tools, environment; not its
tags) — never to the suite revision it was drawn from. So a new revision releases nothing by
itself: items added (new ids) are fresh, items removed stay consumed, and an item is, for
each id of a slice:

- fresh — no look at this id since the last reset;
- consumed — a look at this id with the same content, or a look recorded without a content
  hash (ledgers before version 4: those stay consumed by id, whatever the content now);
- changed — looked at only under other content. Refused by default (a reference silently
  changed under a consumed id is how a holdout leaks); a new item only when the user says so
  (`suite.item_changes: new`), and then the change is recorded in the ledger and the
  experiment log with the verdict that first judges it.

`tuneloop ledger reset` stays the only way to look at consumed items again. Pure: the ledger
reads and writes are the callers' (`loop.integrity`, `gate.verdict`, `loop.rounds.lineage`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

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


def classify(items: Mapping[str, str | None], looks: Mapping[str, list[ItemLook]]) -> SliceLooks:
    """Fresh, consumed and changed items of `items` (id → content hash now, in slice order;
    None: unknown, so any look consumes it) given `looks` (id → looks since the last reset)."""
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
