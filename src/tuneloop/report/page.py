"""What report.html shows, gathered from the round's artifacts (read typed) into plain data.

`run_page` is the capstone's page (every section); `compare_page` is `tuneloop compare
--html`'s (two sample logs: no gate, training, corpus, timings or config, each said so).
A GRPO or composite run (its log has `reward_mean`) also gets `grpo_section`: small multiples
of why RL went flat or collapsed (reward mean ± spread, the share of groups with no reward
spread, KL, entropy, clip ratio, completion length; train/metrics.py names them) and the
prompts seen per difficulty band; a walk-back (`train.health.on_unhealthy`) is said above the
training curves. A portfolio round also gets `portfolio_section`: its challengers, in the
experiment log's words (`records.portfolio_table`), with a bar per validation mean and the
default's marked. A cascade round gets `cascade_section.cascade_section`: the composition on
the validation slice with its frontier, and the answers per tier and cost per item on the
gate slice.
"Why items got worse" is the delta report's diagnosis (`report/diagnosis.py`), as delta.json
holds it. Like the capstone, this reads what the phases wrote and computes no statistic: the
flips are laid out on the same score grid as the delta report (`report/flips.py`), the charts
are drawn from the delta report's numbers and the training log's rows. `report/html.py`
renders a `Page` through an autoescaping template.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuneloop.config import LoopConfig
from tuneloop.provenance import stamp
from tuneloop.records import canonical_json, read_record_if_exists, sha256_bytes
from tuneloop.records.corpus import CorpusProvenance
from tuneloop.records.portfolio_table import (
    challenger_cells,
    choice_sentence,
    default_name,
    header,
    summary_line,
)
from tuneloop.records.run import RunView
from tuneloop.records.selection import PortfolioRecord
from tuneloop.records.train_health import WalkBack
from tuneloop.records.train_metrics import (
    METRICS_FILE,
    TrainMetricsRow,
    band_totals,
    read_train_metrics,
)
from tuneloop.report.cascade_section import CascadeSection, cascade_section
from tuneloop.report.diagnosis import MEANING
from tuneloop.report.flips import Flips, read_flips
from tuneloop.report.inputs import CapstoneInputs, VerdictView
from tuneloop.report.markdown import TRUNCATION_GAP, rescore_line
from tuneloop.report.record import Cause, DeltaReport, Diagnosis
from tuneloop.report.svg import ForestRow, Mark, Series, forest, lines
from tuneloop.samplelog import EvalSummary

CURVES = ("loss", "reward_mean", "kl", "learning_rate", "mean_token_accuracy", "grad_norm")
"""Training quantities drawn, in this order, when the log has them."""

GRPO_PANELS = (
    ("reward mean ± spread", "reward_mean", None),
    ("share of groups with zero reward spread", "frac_zero_spread", 1.0),
    ("KL to the reference", "kl", 0.0),
    ("entropy", "entropy", 0.0),
    ("clip ratio", "clip_ratio", 0.0),
    ("completion length (tokens)", "completion_length", 0.0),
)
"""GRPO diagnostics: (title, metrics.jsonl key, y top), in this order. With a top the y axis
runs from 0 to it or to the data's highest, whichever is higher (a fall to 0 shows as one;
a share of groups runs to 1); None: the data's own range (a reward may be negative)."""

SMALL = 360
"""A small multiple's width (px): three to a row."""


@dataclass(frozen=True)
class Section:
    """A section's content, or why it is absent (`note`)."""

    note: str | None = None


@dataclass(frozen=True)
class GateSection(Section):
    decision: str = ""
    """promote, reject, awaiting_approval; `off` / `not run` when there is no verdict."""
    verdict: VerdictView | None = None


@dataclass(frozen=True)
class FinishRow:
    arm: str
    counts: list[int]
    shares: list[float]
    length_share: float | None


@dataclass(frozen=True)
class Chart:
    title: str
    svg: str


@dataclass(frozen=True)
class BandRow:
    band: str
    prompts: int
    share: float


@dataclass(frozen=True)
class GrpoSection:
    """Why RL went flat or collapsed: one small chart per quantity, the prompts per band."""

    charts: list[Chart]
    absent: list[str]
    """What the log does not have, and why (KL without a reference model)."""
    bands: list[BandRow]


@dataclass(frozen=True)
class ChallengerLine:
    """One challenger's row: the table's cells, and what the page marks."""

    name: str
    cells: list[str]
    """`records.portfolio_table.challenger_cells`: the experiment log's words."""
    selected: bool
    failed: bool
    default: bool
    mean: float | None
    """Its validation mean (the bar's length); None when it did not finish."""
    detail: str
    """The full why (and error), shown on hover where the cell is cut."""


@dataclass(frozen=True)
class PortfolioSection:
    """A portfolio round's challengers (`challengers/selection.json`), or why absent."""

    note: str | None = None
    header: list[str] = field(default_factory=list)
    rows: list[ChallengerLine] = field(default_factory=list)
    summary: str = ""
    """The rule (sha256 prefix), the selection slice, budget against estimate, approval."""
    choice: str = ""
    """Which rule chose which challenger, and why."""
    default_mean: float | None = None
    """The default's validation mean: the mark across the bars."""
    record: str = ""
    """Where the record is."""
    adjudicate: str = "selected"
    """`selected` (the gate judges the chosen one) or `all` (each, Holm-corrected)."""


@dataclass(frozen=True)
class Timing:
    phase: str
    status: str
    seconds: float | None


@dataclass
class Page:
    """Everything report.html shows; a section left None is absent with a note."""

    title: str
    subtitle: str
    gate: GateSection
    delta: DeltaReport | None = None
    delta_note: str | None = None
    charts: list[Chart] = field(default_factory=list)
    """Forest plot and pass@k."""
    finish_reasons: list[str] = field(default_factory=list)
    finish_rows: list[FinishRow] = field(default_factory=list)
    finish_warning: str | None = None
    flips: Flips | None = None
    flips_note: str | None = None
    diagnosis: Diagnosis | None = None
    """Why items got worse or still fail (the delta report's); None: `diagnosis_note` says
    why not."""
    diagnosis_note: str | None = None
    diagnosis_rescore: str = ""
    """The lenient re-score in one sentence (delta.md's words)."""
    meaning: dict[Cause, str] = field(default_factory=lambda: dict(MEANING))
    """What each cause means, in a few words."""
    training: list[Chart] = field(default_factory=list)
    training_note: str | None = None
    walk_back: WalkBack | None = None
    grpo: GrpoSection | None = None
    portfolio: PortfolioSection | None = None
    """A portfolio round's challengers; None (no section) for a round without a portfolio."""
    cascade: CascadeSection | None = None
    """A cascade round's composition and gate-slice figures; None (no section) otherwise."""
    corpus: CorpusProvenance | None = None
    corpus_note: str | None = None
    timings: list[Timing] = field(default_factory=list)
    timings_note: str | None = None
    config_json: str | None = None
    config_sha256: str | None = None
    config_note: str | None = None
    manifest_note: str = ""
    machine: dict[str, Any] = field(default_factory=stamp)


def delta_charts(d: DeltaReport) -> list[Chart]:
    """The forest plot (overall Δ, then each tag) and the pass@k curves with bands."""
    conf = f"{d.settings.confidence:.0%}"
    rows = [ForestRow(f"all items (n={d.n_items})", d.delta, *d.delta_ci, bold=True)]
    rows += [ForestRow(f"{t.tag} (n={t.n_items})", t.delta, *t.delta_ci) for t in d.per_tag]
    pk = d.passk
    k = [float(x) for x in pk.k]
    curves = [
        Series(name, k, band.value, band.low, band.high)
        for name, band in (("pre", pk.pre), ("post", pk.post))
    ]
    charts = [
        Chart(
            f"Paired Δ (post − pre) with {conf} bootstrap CIs, overall and per tag",
            forest(rows),
        ),
    ]
    if len(k) > 1:  # with one sample per item pass@k is pass@1, the mean score above
        charts.append(
            Chart(
                f"pass@k (unbiased, Chen et al. 2021) with {conf} bands; a sample is correct "
                f"at score ≥ {pk.correct_threshold:g}",
                lines(curves, x_label="k", y_label="pass@k", y_range=(0.0, 1.0)),
            )
        )
    return charts


def _finish(page: Page, d: DeltaReport) -> None:
    reasons = sorted(set(d.pre.finish_reasons) | set(d.post.finish_reasons))
    page.finish_reasons = reasons
    for name, arm in (("pre", d.pre), ("post", d.post)):
        counts = [arm.finish_reasons.get(r, 0) for r in reasons]
        total = sum(counts) or 1
        page.finish_rows.append(
            FinishRow(name, counts, [c / total for c in counts], arm.length_share)
        )
    a, b = d.pre.length_share, d.post.length_share
    if a is not None and b is not None and abs(a - b) > TRUNCATION_GAP:
        page.finish_warning = (
            f"{a:.1%} of pre and {b:.1%} of post completions hit max_tokens: part of Δ may "
            "come from where decoding stopped rather than from training."
        )


def _with_delta(
    page: Page, d: DeltaReport | None, flips: tuple[Path, Path, Sequence[str] | None] | None
) -> None:
    if d is None:
        page.diagnosis_note = "not measured (no delta report)"
        return
    page.delta = d
    page.charts = delta_charts(d)
    _finish(page, d)
    page.diagnosis = d.diagnosis
    if d.diagnosis is None:
        page.diagnosis_note = (
            "not measured: the delta report predates the diagnosis; re-running the report "
            "(`tuneloop run CONFIG --only report`, then `--only capstone`; or `tuneloop "
            "compare`) computes it"
        )
    else:
        page.diagnosis_rescore = rescore_line(d.diagnosis)
    if flips is None:
        page.flips_note = "not measured: the delta report does not name its sample logs"
        return
    pre, post, items = flips
    if not (pre.exists() and post.exists()):
        page.flips_note = f"not measured: the sample logs `{pre}`, `{post}` are not here"
        return
    page.flips = read_flips(pre, post, items, d.flips.threshold, d.settings.scorer)
    counted = d.flips.wrong_to_right + d.flips.right_to_wrong
    if len(page.flips.rows) != counted:
        page.flips_note = (
            f"{len(page.flips.rows)} rows here but the delta report counted {counted} flips: "
            "the logs have changed since the report was computed"
        )


def training_charts(rows: Sequence[TrainMetricsRow]) -> list[Chart]:
    """One chart per quantity in CURVES that the training log has, against the step."""
    charts = []
    for name in CURVES:
        series = _panel(rows, name)
        if series:
            chart = lines(series, x_label="step", y_label=name, height=200)
            charts.append(Chart(f"{name} ({sum(len(s.x) for s in series)} points)", chart))
    return charts


def _panel(rows: Sequence[TrainMetricsRow], key: str, spread: bool = False) -> list[Series]:
    """One series per stage of `key` against the step; with `spread`, `reward_mean` ±
    `reward_std` as its band."""
    by_phase: dict[str, list[dict[str, float]]] = {}
    for r in rows:
        values = r.values()
        if key in values:
            by_phase.setdefault(r.phase, []).append({"step": float(r.step), **values})
    out = []
    for phase, picked in by_phase.items():
        xs, ys = [v["step"] for v in picked], [v[key] for v in picked]
        if not spread:
            out.append(Series(phase, xs, ys))
            continue
        sd = [v.get("reward_std", 0.0) for v in picked]
        low = [y - d for y, d in zip(ys, sd, strict=True)]
        high = [y + d for y, d in zip(ys, sd, strict=True)]
        out.append(Series(phase, xs, ys, low, high))
    return out


def grpo_section(
    rows: Sequence[TrainMetricsRow], walk_back: WalkBack | None = None
) -> GrpoSection | None:
    """The GRPO diagnostics of a training log, the walk-back's step marked; None when no row
    logs a reward (not RL)."""
    graded = [r for r in rows if "reward_mean" in r.values()]
    if not graded:
        return None
    charts, absent = [], []
    marks = [Mark(walk_back.step, "walked back")] if walk_back is not None else []
    for title, key, top in GRPO_PANELS:
        series = _panel(graded, key, spread=key == "reward_mean")
        if not series:
            why = " (TRL logs it only with grpo.beta > 0)" if key == "kl" else ""
            absent.append(f"{title}: not in the log{why}")
            continue
        y_range = None
        if top is not None:
            highest = max((y for s in series for y in s.y if math.isfinite(y)), default=0.0)
            y_range = (0.0, max(top, highest) or 1.0)
        svg = lines(
            series,
            x_label="step",
            y_label=key,
            y_range=y_range,
            height=180,
            width=SMALL,
            marks=marks,
        )
        charts.append(Chart(f"{title} ({sum(len(s.x) for s in series)} points)", svg))
    totals = band_totals(graded)
    seen = sum(totals.values()) or 1
    bands = [BandRow(band, n, n / seen) for band, n in sorted(totals.items(), key=lambda t: -t[1])]
    return GrpoSection(charts, absent, bands)


def portfolio_section(path: Path | None) -> PortfolioSection | None:
    """The challengers of a portfolio round (None: not a portfolio round)."""
    if path is None:
        return None
    record = read_record_if_exists(path, PortfolioRecord)
    if record is None:
        return PortfolioSection(note=f"not measured (no `{path}`)")
    default = default_name(record)
    rows = [
        ChallengerLine(
            name=c.name,
            cells=cells,
            selected=c.selected,
            failed=c.status == "failed",
            default=c.name == default,
            mean=c.validation_mean,
            detail=c.why + (f" — {c.error}" if c.error else ""),
        )
        for c, cells in zip(record.challengers, challenger_cells(record), strict=True)
    ]
    return PortfolioSection(
        header=header(record),
        rows=rows,
        summary=summary_line(record),
        choice=choice_sentence(record),
        default_mean=next((r.mean for r in rows if r.default), None),
        record=str(path),
        adjudicate=record.adjudicate,
    )


def _gate(cfg: LoopConfig, verdict: VerdictView | None) -> GateSection:
    if not cfg.gate.enabled:
        return GateSection(
            note="The gate is off (gate.enabled: false): no verdict.", decision="off"
        )
    if verdict is None:
        return GateSection(note="The gate did not run: no verdict.", decision="not run")
    return GateSection(decision=verdict.decision, verdict=verdict)


def _timings(run: RunView, this_phase: str) -> list[Timing]:
    return [
        Timing(name, "writing this report" if name == this_phase else rec.status, rec.duration_s)
        for name, rec in run.phases.items()
    ]


def _report_items(
    evaluated: Sequence[str] | None, verdict: VerdictView | None
) -> Sequence[str] | None:
    """The report slice: every evaluated item except the gate slice the verdict consumed."""
    if evaluated is None or verdict is None:
        return evaluated
    held = set(verdict.item_ids)
    return [i for i in evaluated if i not in held]


def run_page(
    cfg: LoopConfig, run: RunView, inputs: CapstoneInputs, verdict: VerdictView | None
) -> Page:
    """The capstone's page: every section, each read from its artifact."""
    page = Page(
        title=f"tuneloop run {run.run_id} — {cfg.name}",
        subtitle=f"base model {cfg.base_model}; suite {cfg.suite.path}",
        gate=_gate(cfg, verdict),
        portfolio=portfolio_section(inputs.portfolio),
        cascade=cascade_section(inputs.cascade, verdict),
    )
    d = read_record_if_exists(inputs.delta, DeltaReport)
    if d is None:
        page.delta_note = f"not measured (no `{inputs.delta}`)"
    pre = read_record_if_exists(inputs.pre_summary, EvalSummary)
    logs = _logs(d)
    items = _report_items(pre.item_ids if pre is not None else None, verdict)
    _with_delta(page, d, (*logs, items) if logs is not None else None)
    # the trainer contract: the adapter folder holds the adapter, metrics.jsonl and settings
    metrics = inputs.train_settings.parent / METRICS_FILE
    if cfg.merge.zero_adapter:
        page.training_note = "no training: zero-adapter control arm"
    elif metrics.exists():
        rows = read_train_metrics(metrics)
        page.training = training_charts(rows)
        page.grpo = grpo_section(rows, inputs.walk_back)
    else:
        page.training_note = f"not measured (no `{metrics}`)"
    page.walk_back = inputs.walk_back
    page.corpus = read_record_if_exists(inputs.corpus_provenance, CorpusProvenance)
    if page.corpus is None:
        page.corpus_note = (
            f"no corpus build in this round (no `{inputs.corpus_provenance}`); training data "
            f"`{inputs.train_data}`"
        )
    page.timings = _timings(run, inputs.this_phase)
    resolved = cfg.model_dump(mode="json")
    page.config_json = json.dumps(resolved, indent=2, ensure_ascii=False)
    page.config_sha256 = sha256_bytes(canonical_json(resolved).encode())
    page.manifest_note = (
        "The archive phase runs after this report and writes the manifest (every artifact's "
        "size and sha256, this file's included) under "
        f"`{cfg.archive.root}`; `tuneloop archive verify DIR` re-hashes it."
        if cfg.archive.enabled
        else "No archive: archive.enabled is false."
    )
    return page


def _logs(d: DeltaReport | None) -> tuple[Path, Path] | None:
    if d is None or d.pre.log is None or d.post.log is None:
        return None
    return Path(d.pre.log), Path(d.post.log)


def compare_page(d: DeltaReport, pre_log: Path, post_log: Path) -> Page:
    """`tuneloop compare --html`: the comparison of two logs, without a round around it."""
    absent = "not part of `tuneloop compare` (a loop run's report.html has it)"
    page = Page(
        title=f"tuneloop compare — {d.pre.model} → {d.post.model}",
        subtitle=f"pre `{pre_log}`, post `{post_log}`",
        gate=GateSection(note=f"No verdict: {absent}; `tuneloop gate` decides.", decision="none"),
        training_note=absent,
        corpus_note=absent,
        timings_note=absent,
        config_note=absent,
        manifest_note="No manifest: two sample logs compared outside a run.",
    )
    _with_delta(page, d, (pre_log, post_log, None))
    return page


def bar_json(bar: Mapping[str, Any]) -> str:
    """The pre-registered bar as one line of JSON."""
    return json.dumps(dict(bar), ensure_ascii=False)
