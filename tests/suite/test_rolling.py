"""Rolling one-look slices: the one-time split and the choice of the next fresh slice."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tuneloop.errors import InputError
from tuneloop.suite import (
    RollingSplit,
    SuiteItem,
    gate_slice_name,
    next_gate_slice,
    rolling_split,
    seeded_unit,
)


def item(item_id: str, tag: str | None = None) -> SuiteItem:
    tags = (tag,) if tag else ()
    raw = {"id": item_id, "prompt": item_id}
    return SuiteItem(item_id, None, item_id, "numeric", tags, raw)


def split(items: list[SuiteItem], **kw: object) -> RollingSplit:
    args: dict = {"audit_fraction": 0.2, "gate_size": 5, "seed": 0, "stratify_by_tag": True}
    return rolling_split(items, **{**args, **kw})


suites = st.lists(
    st.tuples(st.text(min_size=1, max_size=6), st.sampled_from([*"abcdefgh", None])),
    min_size=0,
    max_size=120,
    unique_by=lambda t: t[0],
).map(lambda pairs: [item(i, t) for i, t in pairs])
params = st.fixed_dictionaries(
    {
        "audit_fraction": st.floats(0, 0.9),
        "gate_size": st.integers(1, 20),
        "seed": st.integers(0, 3),
        "stratify_by_tag": st.booleans(),
    }
)


def first_tag(it: SuiteItem) -> str:
    return it.tags[0] if it.tags else ""


@settings(max_examples=300, deadline=None)
@given(suites, params)
def test_slices_tile_the_suite_disjointly(items: list[SuiteItem], kw: dict) -> None:
    s = rolling_split(items, **kw)
    parts = [s.audit_ids, *s.gate_slices, s.spare_ids]
    flat = [i for part in parts for i in part]
    assert sorted(flat) == sorted(i.id for i in items)  # disjoint, and nothing lost
    assert all(len(g) == kw["gate_size"] for g in s.gate_slices)
    assert len(s.spare_ids) < kw["gate_size"]
    assert len(s.audit_ids) == int(kw["audit_fraction"] * len(items) + 0.5)
    assert all(part == sorted(part) for part in parts)


@settings(max_examples=200, deadline=None)
@given(suites, params, st.randoms(use_true_random=False))
def test_split_ignores_item_order(items: list[SuiteItem], kw: dict, rnd: random.Random) -> None:
    shuffled = list(items)
    rnd.shuffle(shuffled)
    assert rolling_split(items, **kw) == rolling_split(shuffled, **kw)


@settings(max_examples=300, deadline=None)
@given(suites, params)
def test_stratified_parts_keep_each_tags_share(items: list[SuiteItem], kw: dict) -> None:
    """Each tag's count in every part is the floor or ceiling of its proportional share."""
    kw = {**kw, "stratify_by_tag": True}
    s = rolling_split(items, **kw)
    tag_of = {i.id: first_tag(i) for i in items}
    whole = Counter(tag_of.values())
    audit = Counter(tag_of[i] for i in s.audit_ids)
    for tag, n in whole.items():
        assert abs(audit[tag] - len(s.audit_ids) * n / len(items)) < 1
    pool = whole - audit
    pool_size = sum(pool.values())
    for ids in s.gate_slices:
        got = Counter(tag_of[i] for i in ids)
        for tag, n in pool.items():
            assert abs(got[tag] - kw["gate_size"] * n / pool_size) < 1, (tag, got, pool)


def test_exact_split_of_a_small_tagged_suite() -> None:
    items = [item(f"a{i}", "a") for i in range(12)] + [item(f"b{i}", "b") for i in range(8)]
    s = split(items, audit_fraction=0.25, gate_size=5)
    tags = lambda ids: Counter(i[0] for i in ids)  # noqa: E731
    assert tags(s.audit_ids) == {"a": 3, "b": 2}
    assert len(s.gate_slices) == 3 and not s.spare_ids
    assert [tags(g) for g in s.gate_slices] == [{"a": 3, "b": 2}] * 3
    # within a tag, the audit takes the lowest seeded positions
    ranked_a = sorted((f"a{i}" for i in range(12)), key=lambda i: (seeded_unit(i, 0), i))
    assert {i for i in s.audit_ids if i[0] == "a"} == set(ranked_a[:3])


def test_seed_changes_the_split_and_unstratified_ignores_tags() -> None:
    items = [item(f"q{i}", "x" if i % 3 else "y") for i in range(40)]
    assert split(items, seed=0) != split(items, seed=1)
    flat = split(items, stratify_by_tag=False)
    untagged = split([item(i.id) for i in items], stratify_by_tag=False)
    assert flat == untagged


def test_next_gate_slice_skips_any_slice_with_a_consumed_item() -> None:
    s = RollingSplit(
        audit_ids=["z"], gate_slices=[["a", "b"], ["c", "d"], ["e", "f"]], spare_ids=[]
    )
    assert next_gate_slice(s, set()) == (0, ["a", "b"])
    assert next_gate_slice(s, {"b"}) == (1, ["c", "d"])
    assert next_gate_slice(s, {"a", "d", "z"}) == (2, ["e", "f"])
    with pytest.raises(InputError, match="no fresh gate slice: all 3 gate slices of 2 items"):
        next_gate_slice(s, {"a", "c", "f"})


def test_no_slice_at_all_names_the_setting() -> None:
    s = split([item("a"), item("b")], gate_size=5)
    assert s.gate_slices == [] and len(s.spare_ids) == 2
    with pytest.raises(InputError, match="fewer than suite.rolling.gate_size"):
        next_gate_slice(s, set())


def test_bad_parameters_and_duplicates_are_input_errors() -> None:
    with pytest.raises(InputError, match="suite.rolling.audit_fraction"):
        split([item("a")], audit_fraction=1.0)
    with pytest.raises(InputError, match="suite.rolling.gate_size"):
        split([item("a")], gate_size=0)
    with pytest.raises(InputError, match="duplicate item id 'a'"):
        split([item("a"), item("a")])


def test_slice_names_sort_in_round_order() -> None:
    names = [gate_slice_name(i) for i in (0, 9, 10, 200)]
    assert names == ["gate-000", "gate-009", "gate-010", "gate-200"] == sorted(names)


@settings(max_examples=200, deadline=None)
@given(suites, params, st.floats(0, 0.5))
def test_a_validation_part_tiles_with_the_rest_and_changes_nothing_at_zero(
    items: list[SuiteItem], kw: dict, fraction: float
) -> None:
    kw = {**kw, "audit_fraction": min(kw["audit_fraction"], 0.45)}
    s = rolling_split(items, **kw, validation_fraction=fraction)
    parts = [s.audit_ids, s.validation_ids, *s.gate_slices, s.spare_ids]
    flat = [i for part in parts for i in part]
    assert sorted(flat) == sorted(i.id for i in items)  # disjoint, and nothing lost
    wanted = min(int(fraction * len(items) + 0.5), len(items) - len(s.audit_ids))
    if kw["stratify_by_tag"]:  # a tag gives no more than the audit left of it
        assert len(s.validation_ids) <= wanted
    else:
        assert len(s.validation_ids) == wanted
    without = rolling_split(items, **kw)
    assert without.validation_ids == [] and without.audit_ids == s.audit_ids
    assert rolling_split(items, **kw, validation_fraction=0.0) == without


def test_the_validation_part_is_a_slice_name_only_when_it_has_items() -> None:
    from tuneloop.config import SlicingConfig
    from tuneloop.suite import Suite, resolve_slice, slice_names

    items = [item(f"i{n:03d}") for n in range(100)]
    suite = Suite(path=Path("s.jsonl"), revision="r", items=tuple(items))
    rolling = {"audit_fraction": 0.2, "gate_size": 20, "validation_fraction": 0.2}
    cfg = SlicingConfig(slices={}, rolling=rolling)  # type: ignore[arg-type]
    assert slice_names(suite, cfg)[:2] == ["audit", "validation"]
    held = resolve_slice(suite, cfg, "validation")
    assert len(held) == 20 and not set(held) & set(resolve_slice(suite, cfg, "gate-000"))
    plain = SlicingConfig(slices={}, rolling={"audit_fraction": 0.2, "gate_size": 20})  # type: ignore[arg-type]
    assert "validation" not in slice_names(suite, plain)
    with pytest.raises(InputError, match="unknown slice 'validation'"):
        resolve_slice(suite, plain, "validation")
