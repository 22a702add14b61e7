"""A portfolio round's challenger table in words: the cells every page shows it with.

The experiment log (`gate.explog`), the capstone's report.md and report.html (`report`) and
the dashboard (`view`) show the same table of a `PortfolioRecord`; they are phases and
orchestration that may not import each other, so the words live here, beside the record
(as `WalkBack.line()` does for a walk-back). Pure text from the record: nothing is computed
that the record does not hold.

    header(record)            # the columns
    challenger_cells(record)  # one list of cells per challenger, in the record's order
    summary_line(record)      # the rule (sha prefix), the slice, budget vs estimate, approval
    choice_sentence(record)   # which rule chose which challenger, and why
    markdown_table(header, rows)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tuneloop.records.selection import ChallengerRow, PairFigures, PortfolioRecord

HEADER = (
    "challenger",
    "recipe",
    "est. train s",
    "train s",
    "validation mean",
    "vs default",
    "status",
    "selected / why",
)
"""The columns; under `adjudicate: all` a `gate p` column comes before `status`."""

RECIPE_CHARS = 60
"""A recipe cell longer than this is cut (the record has the whole recipe)."""
ERROR_CHARS = 90
"""A failed challenger's error, cut to this."""
WHY_CHARS = 110
"""The why of a row, cut to this."""


def shorten(text: str, limit: int) -> str:
    """One line, at most `limit` characters (an ellipsis marks a cut)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def recipe_text(overrides: Mapping[str, Any]) -> str:
    """The overrides as `k=v`, the `train.` prefix left off; the round's recipe when none."""
    if not overrides:
        return "the round's recipe"
    parts = [f"{k.removeprefix('train.')}={_value(v)}" for k, v in overrides.items()]
    return shorten(", ".join(parts), RECIPE_CHARS)


def _value(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def default_name(record: PortfolioRecord) -> str | None:
    """The default challenger of `default_stays` (None under `best_mean` or with no decision)."""
    return record.decision.default if record.decision is not None else None


def pair_of(record: PortfolioRecord, name: str) -> PairFigures | None:
    """The challenger's paired figures against the default, when the decision has them."""
    if record.decision is None:
        return None
    return next((p for p in record.decision.pairs if p.candidate == name), None)


def vs_default(record: PortfolioRecord, row: ChallengerRow) -> str:
    """Advantage, wins/losses/ties and the sign test's p against the default; `default` for
    the default itself; — when not compared. Under `best_mean` the pairs are against the best
    arm, which is named."""
    if row.name == default_name(record):
        return "default"
    p = pair_of(record, row.name)
    if p is None:
        return "—"
    against = "" if p.default == default_name(record) else f"vs `{p.default}`: "
    inferior = "" if p.non_inferior else ", inferior on a tag"
    return (
        f"{against}{p.advantage:+.4f}, W/L/T {p.wins}/{p.losses}/{p.ties}, "
        f"sign p {p.sign_p:.3g}{inferior}"
    )


def status_text(row: ChallengerRow) -> str:
    if row.status == "failed":
        return "failed: " + shorten(row.error or "no error recorded", ERROR_CHARS)
    return row.status


def selected_text(row: ChallengerRow) -> str:
    why = shorten(row.why, WHY_CHARS)
    return f"✓ {why}" if row.selected else why


def header(record: PortfolioRecord) -> list[str]:
    cols = list(HEADER)
    if record.adjudicate == "all":
        cols.insert(cols.index("status"), "gate p")
    return cols


def challenger_cells(record: PortfolioRecord) -> list[list[str]]:
    """One row of cells per challenger (record order), matching `header(record)`."""
    default = default_name(record)
    rows = []
    for c in record.challengers:
        name = f"`{c.name}`" + (" (default)" if c.name == default else "")
        cells = [
            name,
            recipe_text(c.overrides),
            f"{c.estimate.train_seconds:.0f}",
            _or_dash(c.train_seconds, "{:.1f}"),
            _or_dash(c.validation_mean, "{:.4f}"),
            vs_default(record, c),
            status_text(c),
            selected_text(c),
        ]
        if record.adjudicate == "all":
            cells.insert(-2, _or_dash(c.gate_p, "{:.4g}"))
        rows.append(cells)
    return rows


def _or_dash(x: float | None, fmt: str) -> str:
    return "—" if x is None else fmt.format(x)


def rule_name(record: PortfolioRecord) -> str:
    """The rule as the decision names it; Holm under `adjudicate: all`."""
    if record.adjudicate == "all":
        return "holm (adjudicate: all)"
    if record.decision is not None:
        return str(record.decision.rule.get("rule", "?"))
    return "not applied"


def budget_text(budget: Mapping[str, Any]) -> str:
    parts = []
    if budget.get("max_seconds") is not None:
        parts.append(f"{budget['max_seconds']:g} s")
    if budget.get("max_usd") is not None:
        parts.append(f"${budget['max_usd']:g}")
    if budget.get("max_eval_samples") is not None:
        parts.append(f"{budget['max_eval_samples']} eval samples")
    return " / ".join(parts) or "none"


def summary_line(record: PortfolioRecord) -> str:
    """The rule (with its sha256 prefix), the selection slice, budget vs estimate, approval."""
    items = f", {record.decision.n_items} items" if record.decision is not None else ""
    return (
        f"Rule `{rule_name(record)}` (sha256 {record.rule_sha256[:12]}, sealed "
        f"{record.sealed_at}); selection slice `{record.selection_slice}`{items}; budget "
        f"{budget_text(record.budget)}, estimated {record.estimate_seconds:.0f} s, "
        f"${record.estimate_usd:.2f}, {record.estimate_eval_samples} eval samples; spend "
        f"approval: {record.approval}"
    )


def choice_sentence(record: PortfolioRecord) -> str:
    """One sentence: which rule chose which challenger, and the reason."""
    failed = sum(c.status == "failed" for c in record.challengers)
    skipped = f" ({failed} failed and skipped)" if failed else ""
    if record.selected is None:
        return (
            f"No challenger was selected: none of the {len(record.challengers)} finished"
            f"{skipped}. {record.reason}"
        )
    return (
        f"Rule `{rule_name(record)}` selected `{record.selected}` of "
        f"{len(record.challengers)} challengers{skipped}: {record.reason}"
    )


def markdown_table(cols: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table; a `|` inside a cell is escaped."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return [line(cols), "|" + "---|" * len(cols), *(line(r) for r in rows)]
