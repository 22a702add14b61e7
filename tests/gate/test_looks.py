"""`tuneloop.gate.looks`: fresh, consumed and changed items, whatever the suite revision."""

from __future__ import annotations

from tuneloop.gate.ledger import ItemLook
from tuneloop.gate.looks import classify, counts, name_ids


def look(run: str, sha: str | None, revision: str = "rev1") -> ItemLook:
    return ItemLook(run, f"t-{run}", sha, revision)


def test_a_look_belongs_to_the_item_not_to_the_revision() -> None:
    items = {"same": "h1", "edited": "h2", "added": "h3", "old": "h9"}
    looks = {
        "same": [look("r1", "h1")],
        "edited": [look("r1", "h1")],  # looked at under other content
        "old": [look("r0", None)],  # a look from before ledger version 4: by id alone
        "removed": [look("r1", "h5")],  # not in the suite any more: stays consumed, unasked
    }
    status = classify(items, looks)
    assert status.fresh == ["added"]
    assert list(status.consumed) == ["same", "old"]
    assert status.changed == {"edited": looks["edited"][0]}
    assert status.judgeable(changes_are_new=False) == ["added"]
    assert status.judgeable(changes_are_new=True) == ["edited", "added"]
    assert counts(status) == "1 fresh, 2 already looked at, 1 changed under a consumed id"


def test_content_judged_once_is_consumed_again_and_a_revert_is_too() -> None:
    looks = {"a": [look("r1", "h1"), look("r2", "h2", "rev2")]}
    assert list(classify({"a": "h2"}, looks).consumed) == ["a"]  # the new content, judged
    assert list(classify({"a": "h1"}, looks).consumed) == ["a"]  # back to the old one
    assert list(classify({"a": "h3"}, looks).changed) == ["a"]
    assert list(classify({"a": None}, looks).consumed) == ["a"]  # unknown content: by id


def test_messages_name_ids_and_counts() -> None:
    assert name_ids(["a", "b"]) == "a, b"
    assert name_ids([f"q{i}" for i in range(12)], most=2) == "q0, q1 and 10 more"
    assert counts(classify({"a": "h"}, {})) == "1 fresh, 0 already looked at"
