"""The bar's cost condition (`gate.cost`): what the challenger's answers cost, per item.

A sample row may carry `cost_usd`: its completion tokens × `eval.usd_per_1m` for a single
model, or what a cascade server reported for the request (every tier it asked). On the gate
slice:

- an item's cost is the mean `cost_usd` of its samples;
- an arm's figure is the mean of its items' costs, over the slice items that have a cost in
  both arms, so that both figures are on the same items;
- `cost:max_usd_per_item` holds when the challenger's figure ≤ `max_usd_per_item`;
- `cost:max_ratio_to_champion` holds when the challenger's figure ≤ `max_ratio_to_champion` ×
  the champion's. It is compared as that product, so a champion that cost nothing is no
  division by zero: then only a challenger that cost nothing passes.

The figures are plain means with no test: cost is measured on every answer, not a noisy
judgement, and a limit on a mean is what a budget is. The cost of that choice: a challenger
whose true mean sits just under a limit can fail on one slice's items.

Which rows count, deliberately: every row that carries `cost_usd`, whatever its status (a
harness error was still paid for). A row that got an answer (status ok, or a completion)
without a cost means the log was not priced, and the gate refuses it rather than guess
(`InputError`, exit 2, nothing written). A row that got no answer — `missing`, or a response
too malformed to read — has no cost and is left out of its item's mean: its failure is the
`missing_*` conditions' to judge, not a price. The cost: such a sample makes its arm look no
more expensive than its answered samples; `max_missing_fraction` bounds how many there are.
An item with no costed sample in either arm is left out of both figures; with none left,
every limit fails (fail closed).

Pure: rows and numbers in; the verdict's `CostResult` and the rule's `Condition`s out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tuneloop.config.gate import CostBarConfig
from tuneloop.errors import InputError
from tuneloop.gate.rule import Condition
from tuneloop.gate.verdict_record import CostCondition, CostResult
from tuneloop.samplelog import SampleRow

_REL_TOL = 1e-9
"""A figure equal to its limit up to float rounding of the mean holds ("at most")."""


@dataclass(frozen=True)
class ItemCosts:
    """One arm's cost per slice item, from its rows' `cost_usd`."""

    per_item: np.ndarray
    """Mean `cost_usd` of each slice item's costed samples, in slice order; NaN: none."""
    unpriced: tuple[tuple[str, int], ...]
    """(item, sample index) of the slice's rows that got an answer but carry no cost."""
    where: str
    """The sample-log folder, for the refusal."""


def item_costs(rows: Sequence[SampleRow], item_ids: Sequence[str], where: str) -> ItemCosts:
    """Each slice item's mean `cost_usd` (rows of other items are ignored)."""
    index = {item: i for i, item in enumerate(item_ids)}
    total = np.zeros(len(item_ids))
    count = np.zeros(len(item_ids))
    unpriced = []
    for row in rows:
        i = index.get(row.item_id)
        if i is None:
            continue
        if row.cost_usd is not None:
            total[i] += row.cost_usd
            count[i] += 1
        elif row.status == "ok" or row.completion is not None:
            unpriced.append((row.item_id, row.sample_index))
    per_item = np.full(len(item_ids), np.nan)
    np.divide(total, count, out=per_item, where=count > 0)
    return ItemCosts(per_item, tuple(sorted(unpriced)), where)


def judge_cost(champion: ItemCosts, challenger: ItemCosts, limits: CostBarConfig) -> CostResult:
    """Both arms' dollars per item on their common costed items, against the bar's limits.

    Raises `InputError` when either arm has answered rows without a cost."""
    for arm in (champion, challenger):
        _require_priced(arm)
    both = ~np.isnan(champion.per_item) & ~np.isnan(challenger.per_item)
    n = int(both.sum())
    pre = float(champion.per_item[both].mean()) if n else None
    post = float(challenger.per_item[both].mean()) if n else None
    ratio = post / pre if pre and post is not None else None
    checks = []
    if limits.max_usd_per_item is not None:
        cap = limits.max_usd_per_item
        ok = post is not None and _at_most(post, cap)
        checks.append(CostCondition(name="max_usd_per_item", limit=cap, value=post, passed=ok))
    if limits.max_ratio_to_champion is not None:
        times = limits.max_ratio_to_champion
        ok = post is not None and pre is not None and _at_most(post, times * pre)
        checks.append(
            CostCondition(name="max_ratio_to_champion", limit=times, value=ratio, passed=ok)
        )
    return CostResult(
        n_items=n,
        champion_usd_per_item=pre,
        challenger_usd_per_item=post,
        ratio=ratio,
        conditions=checks,
        passed=all(c.passed for c in checks),
    )


def cost_conditions(result: CostResult) -> list[Condition]:
    """The rule's conditions of a cost result: `cost:<limit>`, one per limit the bar sets."""
    pre, post = result.champion_usd_per_item, result.challenger_usd_per_item
    figures = {
        "n_items": result.n_items,
        "champion_usd_per_item": pre,
        "challenger_usd_per_item": post,
        "ratio": result.ratio,
    }
    out = []
    for c in result.conditions:
        out.append(
            Condition(f"cost:{c.name}", c.passed, _detail(c, result), figures | {"limit": c.limit})
        )
    return out


def _detail(c: CostCondition, result: CostResult) -> str:
    pre, post = result.champion_usd_per_item, result.challenger_usd_per_item
    if pre is None or post is None:
        return f"cost: no slice item has a cost in both arms, so {c.name} cannot hold"
    sign = "≤" if c.passed else ">"
    if c.name == "max_usd_per_item":
        return (
            f"cost: challenger {post:.6g} USD per item ({sign} max_usd_per_item {c.limit:g}; "
            f"champion {pre:.6g} USD, {result.n_items} items)"
        )
    if result.ratio is None:
        return (
            f"cost: challenger {post:.6g} USD per item against a champion that cost nothing "
            f"(max_ratio_to_champion {c.limit:g} allows only 0 USD; {result.n_items} items)"
        )
    return (
        f"cost: challenger {post:.6g} USD per item = {result.ratio:.3g} × the champion's "
        f"{pre:.6g} USD ({sign} max_ratio_to_champion {c.limit:g}; {result.n_items} items)"
    )


def _at_most(value: float, limit: float) -> bool:
    return value <= limit or math.isclose(value, limit, rel_tol=_REL_TOL)


def _require_priced(arm: ItemCosts) -> None:
    if not arm.unpriced:
        return
    item, k = arm.unpriced[0]
    raise InputError(
        f"{arm.where}: {len(arm.unpriced)} answered sample(s) on the gate slice carry no "
        f"cost_usd (first: item {item!r} sample {k}), and the bar has a cost condition "
        "(gate.cost). Evaluate with eval.usd_per_1m set (`--usd-per-1m`; the server must "
        "report completion tokens), or serve a cascade, which reports each request's cost"
    )
