"""Rolling one-look slices: a suite split once into an audit part and a row of gate slices.

    split = rolling_split(suite.items, audit_fraction=0.2, gate_size=50, seed=0,
                          stratify_by_tag=True)
    index, ids = next_gate_slice(split, consumed_ids)   # InputError when none is fresh

The flywheel runs many rounds on one suite, and each round's gate must look at items no
earlier verdict looked at (docs/design.md, §2 "Pre-registered, one look per gate item").
Instead of one `gate` slice per suite, the suite is split ONCE, before any round: an audit
part (reported every round, never a gate slice) and gate slices of `gate_size` items each.
Round r takes the first slice none of whose items the ledger lists as consumed — by item id
and content, under any suite revision (`tuneloop.gate.looks`); when every slice has been
looked at, the round is refused before training — the fix is new items (new ids): a new
revision alone releases nothing.

The exact rule, so that a split can be reproduced elsewhere:

1. Each id gets u = first 8 bytes of sha256(f"{seed}\\n{id}", UTF-8), big-endian / 2**64.
   (Unlike `slices.id_unit`, the seed enters: a new seed is a new split of the same items.)
2. Items are grouped by their first tag when `stratify_by_tag` (untagged items form the group
   ""), else all form one group; within a group they are ranked by (u, id).
3. The audit takes A = floor(audit_fraction · N + 1/2) items. Stratified, group g gives
   floor(A·n_g/N) of its first-ranked items, and the A − Σ floors left over go one each to the
   groups with the largest remainders A·n_g mod N (ties: group name) — largest remainder
   (Hamilton) apportionment, so each tag's audit count is the floor or ceiling of its share.
3a. With `validation_fraction` v > 0, the validation part takes the next-ranked
   V = floor(v · N + 1/2) items after the audit's, apportioned over the groups the same way
   (never more than a group has left). It is neither audited nor ever a gate slice; with
   v = 0 the split is exactly the one without it.
4. The rest is the gate pool, P items, p_g per group; K = P // gate_size slices. Each slice
   takes floor(gate_size·p_g/P) items of every group, and R = gate_size − Σ floors groups
   give one more — only groups whose share gate_size·p_g/P is not a whole number. Slice by
   slice, in order, the extra ones come from the R groups that can still give the most
   (pool items not yet promised, counting at most one per slice left; ties: group name):
   the greedy construction of a 0/1 matrix with given margins (Gale 1957; Ryser 1957),
   which never runs a group dry, since each can give at least K × its fractional share.
   Items are taken in rank order, slice 0 first; what is left of the pool is spare.

Everything depends on the ids, tags and parameters only — never on item order — and every
returned list is sorted. Deliberately different from `slices.slice_ids`: membership here is
decided for the whole suite at once (slices must tile the pool exactly), so adding an item
may move others between gate slices; that is why a new suite revision starts a new split.
Run `pytest tests/suite/test_rolling.py`.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import defaultdict
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from tuneloop.config import SlicingConfig
from tuneloop.errors import InputError, did_you_mean
from tuneloop.suite.reader import Suite, SuiteItem
from tuneloop.suite.slices import slice_ids


@dataclass(frozen=True)
class RollingSplit:
    """A suite's one-time split into an audit part and equal gate slices (ids sorted)."""

    audit_ids: list[str]
    """Reported every round; never used by a gate."""
    gate_slices: list[list[str]]
    """Gate slices in the order rounds take them; `gate_size` ids each."""
    spare_ids: list[str]
    """Pool items too few to fill another slice."""
    validation_ids: list[str] = dataclasses.field(default_factory=list)
    """Where a portfolio's challengers are compared (`validation_fraction`); never a gate
    slice, never audited."""


def seeded_unit(item_id: str, seed: int) -> float:
    """The id's position in [0, 1) under `seed` (step 1 of the module docstring)."""
    digest = hashlib.sha256(f"{seed}\n{item_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def gate_slice_name(index: int) -> str:
    """The name a rolling gate slice is recorded under in the ledger: `gate-000`, …"""
    return f"gate-{index:03d}"


def rolling_split(
    items: Iterable[SuiteItem],
    *,
    audit_fraction: float,
    gate_size: int,
    seed: int,
    stratify_by_tag: bool,
    validation_fraction: float = 0.0,
) -> RollingSplit:
    """Split the items once (see the module docstring for the exact rule)."""
    if not 0 <= audit_fraction < 1:
        raise InputError(f"suite.rolling.audit_fraction must lie in [0, 1) (got {audit_fraction})")
    if gate_size < 1:
        raise InputError(f"suite.rolling.gate_size must be at least 1 (got {gate_size})")
    groups = _ranked_groups(items, seed, stratify_by_tag)
    sizes = {g: len(ids) for g, ids in groups.items()}
    total = sum(sizes.values())
    audit_counts = _largest_remainder(int(audit_fraction * total + 0.5), sizes)
    audit = [i for g, ids in groups.items() for i in ids[: audit_counts[g]]]
    rest = {g: ids[audit_counts[g] :] for g, ids in groups.items()}
    held = _largest_remainder(int(validation_fraction * total + 0.5), sizes)
    held = {g: min(n, len(rest[g])) for g, n in held.items()}
    validation = [i for g, ids in rest.items() for i in ids[: held[g]]]
    pools = {g: ids[held[g] :] for g, ids in rest.items()}
    slices: list[list[str]] = []
    taken = dict.fromkeys(pools, 0)
    for counts in _slice_counts({g: len(ids) for g, ids in pools.items()}, gate_size):
        slices.append(
            sorted(i for g, n in counts.items() for i in pools[g][taken[g] : taken[g] + n])
        )
        taken = {g: taken[g] + counts[g] for g in pools}
    spare = [i for g, ids in pools.items() for i in ids[taken[g] :]]
    return RollingSplit(
        audit_ids=sorted(audit),
        gate_slices=slices,
        spare_ids=sorted(spare),
        validation_ids=sorted(validation),
    )


def _ranked_groups(
    items: Iterable[SuiteItem], seed: int, stratify_by_tag: bool
) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = defaultdict(list)
    seen: set[str] = set()
    for item in items:
        if item.id in seen:
            raise InputError(f"rolling split: duplicate item id {item.id!r}")
        seen.add(item.id)
        groups[item.tags[0] if stratify_by_tag and item.tags else ""].append(item.id)
    return {
        g: sorted(ids, key=lambda i: (seeded_unit(i, seed), i)) for g, ids in sorted(groups.items())
    }


def _largest_remainder(total: int, sizes: dict[str, int]) -> dict[str, int]:
    """`total` apportioned over groups in proportion to `sizes` (Hamilton), exactly."""
    whole = sum(sizes.values())
    if whole == 0:
        return dict.fromkeys(sizes, 0)
    counts = {g: total * n // whole for g, n in sizes.items()}
    by_remainder = sorted(sizes, key=lambda g: (-(total * sizes[g] % whole), g))
    for g in by_remainder[: total - sum(counts.values())]:
        counts[g] += 1
    return counts


def _slice_counts(pool: dict[str, int], size: int) -> list[dict[str, int]]:
    """Items each group gives to each slice (step 4 of the module docstring)."""
    whole = sum(pool.values())
    n_slices = whole // size
    if n_slices == 0:
        return []
    floors = {g: size * n // whole for g, n in pool.items()}
    extras = size - sum(floors.values())
    # how many slices each group can still give one more to; a group whose share is a whole
    # number never does, so that its count is exactly that share
    spare = {g: pool[g] - n_slices * floors[g] if size * pool[g] % whole else 0 for g in pool}
    out = []
    for left in range(n_slices, 0, -1):
        chosen = sorted((g for g in pool if spare[g] > 0), key=lambda g: (-min(spare[g], left), g))
        chosen = chosen[:extras]
        if len(chosen) < extras:  # impossible by Gale–Ryser; a bug if reached
            raise AssertionError(f"rolling split ran out of pool items ({spare})")
        for g in chosen:
            spare[g] -= 1
        out.append({g: floors[g] + (g in chosen) for g in pool})
    return out


def next_gate_slice(split: RollingSplit, consumed_ids: Collection[str]) -> tuple[int, list[str]]:
    """The first gate slice with no consumed item, as (index, ids); InputError when none is left.

    `consumed_ids` are the items the ledger lists as looked at (any slice, any round). A
    slice with even one of them is not fresh: one look is kept per item, not per slice.
    """
    consumed = set(consumed_ids)
    for index, ids in enumerate(split.gate_slices):
        if consumed.isdisjoint(ids):
            return index, ids
    pool = sum(map(len, split.gate_slices)) + len(split.spare_ids)
    if not split.gate_slices:
        raise InputError(
            f"no gate slice: the gate pool holds {pool} items, fewer than "
            "suite.rolling.gate_size; add items with new ids to the suite or "
            "lower suite.rolling.gate_size"
        )
    n, size = len(split.gate_slices), len(split.gate_slices[0])
    raise InputError(
        f"no fresh gate slice: all {n} gate slices of {size} items hold items an earlier "
        "verdict looked at, and a gate looks at an item once, whatever the suite revision; "
        "add items with new ids to the suite before the next round (the new split then "
        "holds slices of fresh items only when there are enough of them)"
    )


# ---- slice names: fractions, rolling parts and unions ----------------------------------------

AUDIT = "audit"
"""The rolling split's audit part, by name."""
VALIDATION = "validation"
"""The rolling split's validation part (`suite.rolling.validation_fraction`), by name."""


def rolling_of(suite: Suite, slicing: SlicingConfig) -> RollingSplit:
    """The suite's rolling split under `slicing.rolling` (InputError when there is none)."""
    r = slicing.rolling
    if r is None:
        raise InputError("suite.rolling is not set: the suite has no audit part or gate-NNN slices")
    return rolling_split(
        suite.items,
        audit_fraction=r.audit_fraction,
        gate_size=r.gate_size,
        seed=r.seed,
        stratify_by_tag=slicing.stratify_by_tag,
        validation_fraction=r.validation_fraction,
    )


def slice_names(suite: Suite, slicing: SlicingConfig) -> list[str]:
    """Every slice name of the suite: the fractions, then `audit` and `gate-NNN` if rolling."""
    if slicing.rolling is None:
        return list(slicing.slices)
    split = rolling_of(suite, slicing)
    held = [VALIDATION] if split.validation_ids else []
    rolling = [AUDIT, *held, *(gate_slice_name(i) for i in range(len(split.gate_slices)))]
    return [*slicing.slices, *rolling]


def resolve_slice(suite: Suite, slicing: SlicingConfig, name: str) -> list[str]:
    """Ids of slice `name`, in suite order: a `suite.slices` fraction, `audit` or `gate-NNN`
    of `suite.rolling`, or a union written `a+b` (a round evaluates `audit+gate-003`)."""
    chosen: set[str] = set()
    split: RollingSplit | None = None
    for part in name.split("+"):
        if part in slicing.slices or slicing.rolling is None:
            chosen.update(
                slice_ids(suite, slicing.slices, part, stratify_by_tag=slicing.stratify_by_tag)
            )
            continue
        split = split or rolling_of(suite, slicing)
        chosen.update(_rolling_part(split, part, slicing))
    return [i.id for i in suite.items if i.id in chosen]


def _rolling_part(split: RollingSplit, part: str, slicing: SlicingConfig) -> list[str]:
    if part == AUDIT:
        return split.audit_ids
    if part == VALIDATION and split.validation_ids:
        return split.validation_ids
    names = [gate_slice_name(i) for i in range(len(split.gate_slices))]
    if part in names:
        return split.gate_slices[names.index(part)]
    held = [VALIDATION] if split.validation_ids else []
    known = sorted(slicing.slices) + [AUDIT, *held] + ([f"{names[0]}…{names[-1]}"] if names else [])
    raise InputError(
        f"unknown slice {part!r}{did_you_mean(part, [*slicing.slices, AUDIT, *held, *names])}; "
        f"the suite has: {', '.join(known)}"
    )
