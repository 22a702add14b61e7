"""Hash slices: disjoint, deterministic, sized, decided by the id alone."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tuneloop.errors import InputError
from tuneloop.suite import Suite, SuiteItem, id_unit, slice_ids


def _suite(ids: range = range(400)) -> Suite:
    """Items q0, q1, … tagged `x` (every fourth) or `y`."""
    items = (
        SuiteItem(f"q{i}", None, f"Q {i}?", "numeric", ("x" if i % 4 == 0 else "y",), {})
        for i in ids
    )
    return Suite(Path("s.jsonl"), "r", tuple(items))


def test_slices_are_disjoint_deterministic_and_sized() -> None:
    suite = _suite()
    fractions = {"gate": 0.3, "dev": 0.5}
    dev = slice_ids(suite, fractions, "dev")
    gate = slice_ids(suite, fractions, "gate")
    assert not set(dev) & set(gate)
    assert 160 < len(dev) < 240 and 80 < len(gate) < 160
    # the documented rule: sorted names, cumulative bounds ("dev" first: [0, 0.5))
    assert all(id_unit(i) < 0.5 for i in dev) and all(0.5 <= id_unit(i) < 0.8 for i in gate)
    assert slice_ids(suite, fractions, "dev") == dev


def test_slice_membership_depends_only_on_the_id() -> None:
    smaller = _suite(range(0, 400, 2))
    dev = set(slice_ids(_suite(), {"dev": 0.5}, "dev"))
    assert set(slice_ids(smaller, {"dev": 0.5}, "dev")) == {i.id for i in smaller.items} & dev


def test_stratified_slices_have_exact_proportions() -> None:
    suite = _suite()
    ids = slice_ids(suite, {"dev": 0.5, "gate": 0.5}, "gate", stratify_by_tag=True)
    tags = {i.id: i.tags[0] for i in suite.items}
    assert sum(tags[i] == "x" for i in ids) == 50 and sum(tags[i] == "y" for i in ids) == 150


def test_slice_errors() -> None:
    suite = _suite(range(10))
    with pytest.raises(InputError, match=r"unknown slice 'gat' \(did you mean 'gate'\?\)"):
        slice_ids(suite, {"dev": 0.5, "gate": 0.5}, "gat")
    with pytest.raises(InputError, match="sum to ≤ 1"):
        slice_ids(suite, {"dev": 0.7, "gate": 0.5}, "dev")


_MANY = Suite(
    Path("x"), "r", tuple(SuiteItem(f"item-{i}", None, "p", "exact", (), {}) for i in range(300))
)


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.sampled_from("abcde"), st.floats(0.01, 0.2), min_size=1))
def test_slices_partition_property(fractions: dict[str, float]) -> None:
    seen: set[str] = set()
    for name in fractions:
        members = set(slice_ids(_MANY, fractions, name))
        assert not members & seen
        seen |= members
        assert abs(len(members) - 300 * fractions[name]) < 60  # hash spreads ids evenly
    assert len(seen) == sum(1 for i in _MANY.items if id_unit(i.id) < sum(fractions.values()))
