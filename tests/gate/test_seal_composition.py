"""A cascade round's composition sealed in the ledger (`gate.seal.seal_composition`): the same
choice again is a resume, another one is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuneloop.errors import InputError
from tuneloop.gate.bar import Bar
from tuneloop.gate.ledger import open_ledger
from tuneloop.gate.seal import composition_seal_id, seal_bar, seal_composition, selection_sha256

ITEMS = ["a", "b", "c"]
CHOICE = {
    "rule": {"objective": "min_cost_non_inferior", "tiers": [["small", 0.2], ["big", 8.0]]},
    "logs": {"small": "1" * 64, "big": "2" * 64},
    "chosen_sha256": "3" * 64,
    "descriptor_sha256": "4" * 64,
}


def test_the_seal_id() -> None:
    assert composition_seal_id("loop-20261201-000000") == "loop-20261201-000000:composition"


def test_the_same_choice_again_returns_the_first_seal(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    first = seal_composition(db, "r1", CHOICE, "dev", ITEMS, "t0")
    assert (first.seal_id, first.bar, first.slice, first.n_items) == (
        "r1:composition",
        CHOICE,
        "dev",
        3,
    )
    assert first.bar_sha256 == selection_sha256(CHOICE)
    reordered = dict(reversed(list(CHOICE.items())))  # hashed as canonical JSON
    again = seal_composition(db, "r1", reordered, "dev", list(reversed(ITEMS)), "t1")
    assert again == first and again.sealed_at == "t0"
    with open_ledger(db) as ledger:
        assert ledger.sealed("r1:composition") == first


@pytest.mark.parametrize(
    ("choice", "slice_name", "items"),
    [
        (CHOICE | {"chosen_sha256": "5" * 64}, "dev", ITEMS),
        (CHOICE, "validation", ITEMS),
        (CHOICE, "dev", ITEMS[:2]),
    ],
)
def test_another_choice_is_refused(
    tmp_path: Path, choice: dict[str, object], slice_name: str, items: list[str]
) -> None:
    db = tmp_path / "ledger.db"
    first = seal_composition(db, "r1", CHOICE, "dev", ITEMS, "t0")
    with pytest.raises(InputError) as err:
        seal_composition(db, "r1", choice, slice_name, items, "t1")
    message = str(err.value)
    assert "the cascade of round 'r1' was composed and sealed at t0" in message
    assert "--from compose" in message
    with open_ledger(db) as ledger:
        assert ledger.sealed("r1:composition") == first  # the first seal stays


def test_a_composition_and_a_bar_of_one_round_are_sealed_apart(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    bar = seal_bar(db, "r1", Bar(margin=0.02), "gate", ["g1", "g2"], "t0")
    composed = seal_composition(db, "r1", CHOICE, "dev", ITEMS, "t1")
    assert (bar.seal_id, composed.seal_id) == ("r1", "r1:composition")
    other_round = seal_composition(
        db, "r2", CHOICE | {"chosen_sha256": "6" * 64}, "dev", ITEMS, "t2"
    )
    assert other_round.seal_id == "r2:composition"
    with open_ledger(db) as ledger:
        assert ledger.sealed("r1") == bar and ledger.sealed("r1:composition") == composed
