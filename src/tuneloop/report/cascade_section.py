"""A cascade round's section of the capstone: report.md's `## Cascade`, report.html's `#cascade`.

A round with `serve.challenger: cascade` composed its challenger in the `compose` phase; both
pages then show, in the experiment log's words (`records.cascade_table`):

- on the validation slice, from `compose/composition.json` (read typed): each tier alone
  (accuracy, dollars per item), the chosen setting (thresholds, accuracy, dollars per item,
  the share of items each tier answered), the objective and the reason for its choice, and
  the frontier as the compose phase drew it (`compose/frontier.svg`: report.md links it by
  relative path, as it links the report phase's figures; report.html carries it inline);
- on the gate slice (the verdict's items; without a verdict, every item the post arm
  evaluated): how many answers each tier gave, counted from eval_post's rows' cascade traces,
  each arm's mean `cost_usd` per item, and the verdict's cost conditions when the bar set any.

Like the rest of the capstone it computes no statistic: it counts rows and averages their
costs. report.html shows the figure as an image from a `data:` URI rather than as inline
markup: the file is a standalone SVG whose own `<style>` would otherwise restyle the page.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass, field
from pathlib import Path

from tuneloop.records import read_record_if_exists
from tuneloop.records.cascade_table import (
    COVERAGE_HEADER,
    TIER_HEADER,
    chosen_sentence,
    cost_text,
    coverage_cells,
    gate_figures,
    markdown_text,
    objective_sentence,
    tier_cells,
)
from tuneloop.records.composition import CompositionRecord
from tuneloop.records.portfolio_table import markdown_table
from tuneloop.report.inputs import CascadeInputs, VerdictView
from tuneloop.samplelog import SUMMARY_FILE, load_sample_log


@dataclass(frozen=True)
class GateSlice:
    """The post arm's answers per tier and both arms' cost on the gate slice, or why absent."""

    note: str | None = None
    label: str = ""
    """Which items the figures are counted on."""
    coverage_header: tuple[str, ...] = COVERAGE_HEADER
    coverage_rows: list[list[str]] = field(default_factory=list)
    """Answers per tier (and the rows with no answer)."""
    cost: str = ""
    """Each arm's mean cost per item."""


@dataclass(frozen=True)
class CascadeSection:
    """What both pages show of a cascade round, or why it is absent (`note`)."""

    note: str | None = None
    record: str = ""
    """Where the composition is."""
    objective: str = ""
    """The objective, its budget or ε, the signal, the items, and the reason."""
    tier_header: tuple[str, ...] = TIER_HEADER
    tier_rows: list[list[str]] = field(default_factory=list)
    """Each tier alone on the validation slice."""
    chosen: str = ""
    """The chosen setting: thresholds, accuracy, dollars per item, share answered per tier."""
    frontier: Path | None = None
    """The compose phase's frontier.svg; None when it is not there."""
    frontier_svg: str | None = None
    """Its text, for report.html."""
    gate: GateSlice = field(default_factory=GateSlice)
    cost_conditions: list[str] = field(default_factory=list)
    """The verdict's cost conditions, each `✓ name: detail` or `✗ …`."""

    @property
    def frontier_uri(self) -> str | None:
        """The frontier as a `data:` URI (report.html's CSP allows images from `data:`)."""
        if self.frontier_svg is None:
            return None
        encoded = base64.b64encode(self.frontier_svg.encode()).decode("ascii")
        return f"data:image/svg+xml;base64,{encoded}"


def cascade_section(
    inputs: CascadeInputs | None, verdict: VerdictView | None
) -> CascadeSection | None:
    """A cascade round's section (None: not a cascade round)."""
    if inputs is None:
        return None
    record = read_record_if_exists(inputs.composition, CompositionRecord)
    if record is None:
        return CascadeSection(note=f"not measured (no `{inputs.composition}`)")
    has_figure = inputs.frontier.is_file()
    return CascadeSection(
        record=str(inputs.composition),
        objective=objective_sentence(record),
        tier_rows=tier_cells(record),
        chosen=chosen_sentence(record),
        frontier=inputs.frontier if has_figure else None,
        frontier_svg=inputs.frontier.read_text(encoding="utf-8") if has_figure else None,
        gate=_on_gate(inputs, record, verdict),
        cost_conditions=_cost_conditions(verdict),
    )


def _on_gate(
    inputs: CascadeInputs, record: CompositionRecord, verdict: VerdictView | None
) -> GateSlice:
    """Answers per tier and cost per item on the gate slice, from both arms' rows."""
    for log in (inputs.pre_log, inputs.post_log):
        if not (log / SUMMARY_FILE).is_file():
            return GateSlice(note=f"not measured (no sample log in `{log}`)")
    _, pre = load_sample_log(inputs.pre_log)
    post_summary, post = load_sample_log(inputs.post_log)
    if verdict is not None:
        items = list(verdict.item_ids)
        label = f"On the gate slice `{verdict.slice}` ({len(items)} items), from eval_post's rows"
    else:
        items = list(post_summary.item_ids)
        label = f"On every item eval_post evaluated ({len(items)} items; no gate verdict)"
    figures = gate_figures([t.name for t in record.tiers], pre, post, items)
    return GateSlice(label=label, coverage_rows=coverage_cells(figures), cost=cost_text(figures))


def _cost_conditions(verdict: VerdictView | None) -> list[str]:
    if verdict is None:
        return []
    return [
        f"{'✓' if c.passed else '✗'} {c.name}: {c.detail}"
        for c in verdict.conditions
        if c.name.startswith("cost:")
    ]


def cascade_lines(section: CascadeSection | None, out: Path) -> list[str]:
    """report.md's `## Cascade` (none for a round without a cascade); `out` is where the
    report is written (the frontier's link is relative to it)."""
    if section is None:
        return []
    head = ["## Cascade", ""]
    if section.note is not None:
        return [*head, section.note, ""]
    if section.frontier is not None:
        link = Path(os.path.relpath(section.frontier, out.parent)).as_posix()
        figure = f"![accuracy/cost frontier on the validation slice]({link})"
    else:
        figure = "Frontier: not drawn (no `frontier.svg` beside the composition)"
    lines = [
        *head,
        f"- Record: `{section.record}`",
        f"- {markdown_text(section.objective)}",
        "",
        "Each tier alone on the validation slice:",
        "",
        *markdown_table(section.tier_header, section.tier_rows),
        "",
        f"- Chosen: {markdown_text(section.chosen)}",
        "",
        figure,
        "",
    ]
    gate = section.gate
    if gate.note is not None:
        lines.append(f"Gate slice: {gate.note}")
    else:
        table = markdown_table(gate.coverage_header, gate.coverage_rows)
        lines += [f"{gate.label}:", "", *table, "", f"- Mean cost per item: {gate.cost}"]
    lines += [f"- {c}" for c in section.cost_conditions]
    return [*lines, ""]
