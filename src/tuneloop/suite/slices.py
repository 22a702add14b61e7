"""Deterministic named slices of a suite, by id hash.

    gate_ids = slice_ids(suite, {"dev": 0.5, "gate": 0.5}, "gate")

The exact rule, so that slices can be reproduced elsewhere: each id gets u = first 8 bytes of
sha256(id, UTF-8) as a big-endian integer / 2**64, in [0, 1). Slice names are sorted; slice k
covers [c_{k-1}, c_k) where c_k is the running sum of the fractions in that order (c_0 = 0).
Ids with u beyond the total belong to no slice. Membership depends only on the id, so editing
other items never moves an item between slices. With `stratify_by_tag`, items are grouped by
their first tag (untagged items form one group), sorted by u within each group, and slice k
takes ranks [round(c_{k-1}·n), round(c_k·n)) of the group's n items: exact proportions per tag,
still decided by the id hash alone.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict

from tuneloop.errors import InputError, did_you_mean
from tuneloop.suite.reader import Suite


def id_unit(item_id: str) -> float:
    """The id's position in [0, 1): first 8 bytes of sha256(id) / 2**64."""
    digest = hashlib.sha256(item_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _bounds(fractions: dict[str, float], name: str) -> tuple[float, float]:
    if name not in fractions:
        known = ", ".join(sorted(fractions)) or "none"
        raise InputError(
            f"unknown slice {name!r}{did_you_mean(name, fractions)}; configured: {known} "
            "(suite.slices in loop.yaml, --slices on a command line)"
        )
    bad = {k: v for k, v in fractions.items() if not 0 < v <= 1}
    if bad or sum(fractions.values()) > 1 + 1e-9:
        raise InputError(
            f"suite.slices: fractions must each be in (0, 1] and sum to ≤ 1 (got {fractions})"
        )
    low = 0.0
    for key in sorted(fractions):
        high = low + fractions[key]
        if key == name:
            return low, high
        low = high
    raise AssertionError("unreachable")


def slice_ids(
    suite: Suite, fractions: dict[str, float], name: str, *, stratify_by_tag: bool = False
) -> list[str]:
    """Ids of slice `name`, in suite order; see the module docstring for the exact rule."""
    low, high = _bounds(fractions, name)
    if not stratify_by_tag:
        chosen = {i.id for i in suite.items if low <= id_unit(i.id) < high}
    else:
        groups: dict[str, list[str]] = defaultdict(list)
        for item in suite.items:
            groups[item.tags[0] if item.tags else ""].append(item.id)
        chosen = set()
        for ids in groups.values():
            ranked = sorted(ids, key=lambda i: (id_unit(i), i))
            n = len(ranked)
            chosen.update(ranked[round(low * n) : round(high * n)])
    return [i.id for i in suite.items if i.id in chosen]
