"""EXPERIMENT-LOG.md: one append-only Markdown entry per gate round, beside the ledger.

The ledger is the source of truth; this file is the human-readable trail a reviewer scrolls
through. Entries are appended and fsynced, never rewritten. Each entry carries an HTML comment
with its run id (`<!-- tuneloop:verdict RUN -->`), so writing the same round twice (a resumed
gate phase) appends nothing the second time.

A portfolio round's entry ends with its challengers (`portfolio_lines`): the sealed selection
rule, the slice it consumed, the budget against the estimate and how the spend was approved,
then one table row per challenger (recipe, estimated and measured training seconds,
validation mean, its figures against the default, failed and why, selected and why). The
words are `records.portfolio_table`'s, which the capstone and the dashboard show too.

A cascade round's entry (`serve.challenger: cascade`) says, after the bar, what the composed
cascade was and did (`cascade_lines`): the thresholds chosen on the validation slice, how many
gate-slice answers each tier gave, and each arm's mean cost per item, counted from the two
sample logs (`cascade_round`); the words are `records.cascade_table`'s, which the capstone
shows too.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tuneloop.gate.bar import SequenceTerm
from tuneloop.gate.champion import describe
from tuneloop.gate.verdict_record import CostResult, JudgeNote
from tuneloop.records.cascade_table import (
    CascadeRound,
    chosen_sentence,
    cost_text,
    coverage_text,
    gate_figures,
)
from tuneloop.records.composition import CompositionRecord
from tuneloop.records.portfolio_table import (
    challenger_cells,
    choice_sentence,
    header,
    markdown_table,
    summary_line,
)
from tuneloop.records.selection import PortfolioRecord
from tuneloop.samplelog import load_sample_log

LOG_NAME = "EXPERIMENT-LOG.md"
_HEADER = "# Experiment log\n\nOne entry per gate round, appended by `tuneloop gate`.\n"


def log_path(ledger_path: Path) -> Path:
    return Path(ledger_path).parent / LOG_NAME


def append_entry(path: Path, marker: str, text: str) -> bool:
    """Append `text` unless an entry with `marker` exists; returns whether it appended."""
    path = Path(path)
    tag = f"<!-- tuneloop:{marker} -->"
    existing = path.read_text(encoding="utf-8") if path.exists() else ""
    if tag in existing:
        return False
    prefix = "" if existing else _HEADER
    with path.open("a", encoding="utf-8") as fh:
        fh.write(f"{prefix}\n{tag}\n{text.rstrip()}\n")
        fh.flush()
        os.fsync(fh.fileno())
    return True


def verdict_entry(
    v: dict[str, Any],
    portfolio: PortfolioRecord | None = None,
    cascade: CascadeRound | None = None,
) -> str:
    """The Markdown entry of one verdict record (a `GateVerdict.to_json()` dict); a portfolio
    round's challengers (its `challengers/selection.json`) close it, under `- Challengers:`;
    a cascade round's composition and gate-slice figures follow the bar."""
    s, bar = v["stats"], v["bar"]
    champ, chall = v["champion"], v["challenger"]
    reuse = v.get("slice_reuse")
    consumed = f"slice `{v['slice']}` (suite {v['suite_revision'][:12]}, {s['n_items']} items)"
    if reuse:
        earlier = ", ".join(reuse["previous_runs"])
        consumed += f" — **reused** (explicitly allowed; consumed before by {earlier})"
    bound = s.get("delta_lower_bound")
    bound_txt = (
        f", {s['bound_confidence']:.0%} lower bound {bound:+.4f}" if bound is not None else ""
    )
    lines = [
        f"## {v['decided_at']} — run `{v['run_id']}` — **{v['decision']}**",
        "",
        f"- Slice consumed: {consumed}",
        f"- Champion{_version(v.get('champion_version'))}: `{champ['model']}` — "
        f"{bar['metric']} {_num(champ['mean'])}, {champ['missing_fraction']:.2%} unscored",
        f"- Challenger: `{chall['model']}` — {bar['metric']} {_num(chall['mean'])}, "
        f"{chall['missing_fraction']:.2%} unscored",
        f"- Δ = {s['delta']:+.4f}{bound_txt}; one-sided {bar['test']} p = {s['p_value']:.4g}; "
        f"wins/losses/ties {s['wins']}/{s['losses']}/{s['ties']}",
        f"- Bar: margin {bar['margin']:g}, α {_alpha(bar)}, min_items {bar['min_items']}, "
        f"max missing {bar['max_missing_fraction']:g}, non-inferiority ε "
        f"{bar['non_inferiority_epsilon'] or 'off'} (bar {v['bar_sha256'][:12]})",
    ]
    if v.get("cost"):
        lines.append(f"- {CostResult.model_validate(v['cost']).sentence()}")
    if v.get("judge"):
        lines.append(f"- {JudgeNote.model_validate(v['judge']).sentence()}")
    if cascade is not None:
        lines += cascade_lines(cascade)
    if v["reasons"]:
        lines.append("- Reasons: " + "; ".join(v["reasons"]))
    else:
        lines.append("- All conditions passed")
    for warning in v.get("warnings", []):
        lines.append(f"- Warning: {warning}")
    if v.get("new_champion_version"):
        desc = describe(v.get("challenger_descriptor") or {})
        lines.append(f"- New champion: v{v['new_champion_version']} — {desc}")
    elif v["decision"] == "promote":
        lines.append("- Promotion pending: the champion changes once the run is archived")
    if portfolio is not None:
        # the list item's own paragraphs and table: indented under it, after a blank line
        lines += ["- Challengers:", ""]
        lines += [f"  {line}" if line else "" for line in portfolio_lines(portfolio)]
    return "\n".join(lines) + "\n"


def portfolio_lines(record: PortfolioRecord) -> list[str]:
    """A portfolio round's challengers in Markdown: the rule (sha256 prefix), the selection
    slice, the budget against the estimate and the approval; one table row per challenger;
    which one the gate adjudicates and why."""
    return [
        summary_line(record),
        "",
        *markdown_table(header(record), challenger_cells(record)),
        "",
        choice_sentence(record),
    ]


def cascade_lines(cascade: CascadeRound) -> list[str]:
    """A cascade round in a few Markdown lines: the chosen thresholds on the validation
    slice, the answers per tier on the gate slice, and each arm's mean cost per item."""
    figures = cascade.gate
    return [
        f"- Cascade chosen on the validation slice: {chosen_sentence(cascade.composition)}",
        f"- Answered on the gate slice: {coverage_text(figures)}",
        f"- Mean cost per item on the gate slice: {cost_text(figures)}",
    ]


def cascade_round(
    composition: CompositionRecord, champion_log: Path, challenger_log: Path, item_ids: list[str]
) -> CascadeRound:
    """The composition with both arms' figures on the gate slice, read from their logs."""
    _, pre = load_sample_log(Path(champion_log))
    _, post = load_sample_log(Path(challenger_log))
    names = [t.name for t in composition.tiers]
    return CascadeRound(composition, gate_figures(names, pre, post, item_ids))


def approval_entry(run_id: str, at: str, version: int, descriptor: dict[str, Any]) -> str:
    return (
        f"## {at} — approval of run `{run_id}` — **promote**\n\n"
        f"- New champion: v{version} — {describe(descriptor)}\n"
    )


def promotion_entry(run_id: str, at: str, version: int, descriptor: dict[str, Any]) -> str:
    where = descriptor.get("location") or "as described"
    return (
        f"## {at} — promotion of run `{run_id}`\n\n"
        f"- New champion: v{version} — {describe(descriptor)} ({where})\n"
    )


def _alpha(bar: dict[str, Any]) -> str:
    """The bar's α, and under a sequence rule whose α_k it is (`gate.sequence`)."""
    term = bar.get("sequence")
    if not isinstance(term, dict):
        return f"{bar['alpha']:g}"
    t = SequenceTerm.model_validate(term)
    return f"{bar['alpha']:.3g} (α_{t.k}: {t.describe()})"


def _version(version: int | None) -> str:
    return f" (v{version})" if version else " (base, no version yet)"


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4f}"
