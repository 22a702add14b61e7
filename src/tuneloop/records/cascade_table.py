"""A cascade round in words: its composition and what its post arm did on the gate slice.

The capstone's report.md and report.html (`report`) and the experiment log (`gate.explog`)
show the same figures of a cascade round; they are phases that may not import each other, so
the words live here, beside the record (as `portfolio_table` does for a portfolio round).

    tier_cells(record)          # each tier alone on the validation items: one row of cells
    chosen_sentence(record)     # the chosen thresholds, accuracy, USD per item, coverage
    objective_sentence(record)  # the objective, its budget or ε, and the reason for the choice
    gate_figures(tiers, pre_rows, post_rows, item_ids)  # counted from the arms' sample rows
    coverage_cells(figures), coverage_text(figures), cost_text(figures)

The composition's words are the record's figures, nothing recomputed. The gate slice's are
counts and means over the arms' rows: how many answers each tier gave (the tier of each row's
cascade trace; a row without one got no answer: missing or a harness error), and each arm's
mean `cost_usd` per item, an item's cost being the mean of its costed samples, as the gate's
cost condition counts it (`gate.cost`). Unlike that condition, each arm's mean is over its own
costed items (a champion evaluated without `eval.usd_per_1m` is "not priced", and the post
arm still has its figure); the verdict's cost line, when the bar sets one, gives the paired
figure.

Dollars are written `USD`, not `$`: two dollar signs on one Markdown line render as math on
GitHub. The record's own `reason` says `$`, so Markdown pages pass it through `markdown_text`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from tuneloop.records.composition import CompositionRecord

TIER_HEADER = ("tier", "model", "USD/1M tokens", "accuracy", "USD/item")
"""The columns of `tier_cells`."""
COVERAGE_HEADER = ("tier", "answered", "share")
"""The columns of `coverage_cells`."""
NO_ANSWER = "no answer"
"""The coverage row of the slice's rows with no cascade trace (missing, harness error)."""


def thresholds_text(thresholds: Sequence[float]) -> str:
    """Hand-off thresholds as printed: 3 significant digits, +inf (hand every item on) as ∞."""
    return ", ".join("∞" if math.isinf(t) and t > 0 else f"{t:.3g}" for t in thresholds)


def usd(x: float | None) -> str:
    """Dollars per item, 3 significant digits; n/a for none."""
    return "n/a" if x is None else f"{x:.3g} USD"


def markdown_text(text: str) -> str:
    """Plain text for a Markdown line: a `$` escaped, so that two of them are not math."""
    return text.replace("$", "\\$")


def tier_cells(record: CompositionRecord) -> list[list[str]]:
    """Each tier alone on the validation items, in cascade order (`TIER_HEADER`)."""
    return [
        [f"`{t.name}`", f"`{t.model}`", f"{t.usd_per_1m:g}", f"{t.accuracy:.1%}", f"{t.cost:.3g}"]
        for t in record.tiers
    ]


def served_thresholds(record: CompositionRecord) -> list[float] | None:
    """The thresholds the chosen cascade is served with (its descriptor's: each midway below
    the chosen one, `cascade.compose`); None when nothing was chosen."""
    if record.descriptor is None:
        return None
    parts = record.descriptor.get("components", [])
    return [float(c["threshold"]) for c in parts if c.get("threshold") is not None]


def chosen_sentence(record: CompositionRecord) -> str:
    """The chosen setting on the validation items: its thresholds (and the served ones), its
    accuracy and dollars per item, and the share of items each tier answered."""
    p = record.chosen
    if p is None:
        return "nothing chosen: no setting meets the objective"
    served = served_thresholds(record)
    at = f" (served at {thresholds_text(served)})" if served and served != p.thresholds else ""
    names = [t.name for t in record.tiers]
    shares = ", ".join(f"`{n}` {c:.0%}" for n, c in zip(names, p.coverage, strict=False))
    return (
        f"thresholds {thresholds_text(p.thresholds)}{at} → {p.accuracy:.1%} at "
        f"{usd(p.cost)} per item; items answered: {shares}"
    )


def objective_sentence(record: CompositionRecord) -> str:
    """The objective with its budget or ε, the signal, the items, and the reason."""
    if record.objective == "max_accuracy_under_cost":
        limit = f"budget {usd(record.budget)} per item"
    else:
        limit = f"ε {record.epsilon:g}"
    return (
        f"Objective `{record.objective}` ({limit}), signal `{record.signal}`, on "
        f"{record.n_items} validation items: {record.reason}"
    )


@dataclass(frozen=True)
class TierCount:
    tier: str
    answers: int
    """Rows of the slice this tier's answer was returned for."""


@dataclass(frozen=True)
class GateFigures:
    """A cascade round's arms on the gate slice, counted from their sample rows."""

    n_items: int
    """The slice's items."""
    answers: int
    """The post arm's rows on the slice (items × samples, as logged)."""
    by_tier: tuple[TierCount, ...]
    """Answers per tier: the composition's tiers in order, then any other tier a trace names."""
    unanswered: int
    """Rows on the slice without a cascade trace (missing, or a harness error)."""
    pre_usd: float | None
    """The champion's mean cost per item (None: none of its rows carries a cost)."""
    pre_items: int
    """Slice items with a cost in the champion's rows."""
    post_usd: float | None
    post_items: int


class _Answered(Protocol):
    @property
    def tier(self) -> str: ...


class CostedRow(Protocol):
    """What the counting reads of a sample row (`samplelog.SampleRow` has it): the sample log
    sits above the records, so it is named by shape, not imported."""

    @property
    def item_id(self) -> str: ...
    @property
    def cost_usd(self) -> float | None: ...
    @property
    def cascade(self) -> _Answered | None: ...


class CascadeRound(NamedTuple):
    """What a cascade round's experiment-log entry shows: the composition and the gate slice."""

    composition: CompositionRecord
    gate: GateFigures


def gate_figures(
    tiers: Sequence[str],
    pre_rows: Sequence[CostedRow],
    post_rows: Sequence[CostedRow],
    item_ids: Sequence[str],
) -> GateFigures:
    """Per-tier answers of the post arm and both arms' mean cost per item, on `item_ids`
    (rows of other items are ignored)."""
    wanted = set(item_ids)
    post = [r for r in post_rows if r.item_id in wanted]
    counts = dict.fromkeys(tiers, 0)
    unanswered = 0
    for row in post:
        if row.cascade is None:
            unanswered += 1
        else:
            counts[row.cascade.tier] = counts.get(row.cascade.tier, 0) + 1
    pre_usd, pre_items = _usd_per_item(pre_rows, wanted)
    post_usd, post_items = _usd_per_item(post, wanted)
    return GateFigures(
        n_items=len(wanted),
        answers=len(post),
        by_tier=tuple(TierCount(t, n) for t, n in counts.items()),
        unanswered=unanswered,
        pre_usd=pre_usd,
        pre_items=pre_items,
        post_usd=post_usd,
        post_items=post_items,
    )


def _usd_per_item(rows: Sequence[CostedRow], items: set[str]) -> tuple[float | None, int]:
    """The mean over items of each item's mean `cost_usd`, and how many items have one."""
    costs: dict[str, list[float]] = {}
    for row in rows:
        if row.item_id in items and row.cost_usd is not None:
            costs.setdefault(row.item_id, []).append(row.cost_usd)
    if not costs:
        return None, 0
    per_item = [sum(c) / len(c) for c in costs.values()]
    return sum(per_item) / len(per_item), len(per_item)


def coverage_cells(figures: GateFigures) -> list[list[str]]:
    """One row per tier (`COVERAGE_HEADER`), and one for the rows with no answer if any."""
    rows = [(f"`{c.tier}`", c.answers) for c in figures.by_tier]
    if figures.unanswered:
        rows.append((NO_ANSWER, figures.unanswered))
    return [[name, str(n), _share(n, figures.answers)] for name, n in rows]


def coverage_text(figures: GateFigures) -> str:
    """The answers per tier on one line, with what they are counted over."""
    parts = [
        f"`{c.tier}` {c.answers} ({_share(c.answers, figures.answers)})" for c in figures.by_tier
    ]
    if figures.unanswered:
        parts.append(f"{NO_ANSWER} {figures.unanswered}")
    return f"{', '.join(parts)} of {_answers(figures)}"


def cost_text(figures: GateFigures) -> str:
    """Each arm's mean cost per item, over its costed items, and their ratio."""
    pre = _arm_usd(figures.pre_usd, figures.pre_items)
    post = _arm_usd(figures.post_usd, figures.post_items)
    ratio = ""
    if figures.pre_usd and figures.post_usd is not None:
        ratio = f"; {figures.post_usd / figures.pre_usd:.3g} × the champion's"
    return f"champion (pre) {pre}, cascade (post) {post}{ratio}"


def _arm_usd(value: float | None, items: int) -> str:
    if value is None:
        return "not priced (no row carries cost_usd)"
    return f"{usd(value)} ({items} items)"


def _answers(figures: GateFigures) -> str:
    if figures.answers == figures.n_items:
        return f"{figures.n_items} items"
    return f"{figures.answers} answers on {figures.n_items} items"


def _share(n: int, total: int) -> str:
    return f"{n / total:.1%}" if total else "n/a"
