"""The capstone `report.md`: one page a reviewer reads to judge the run (and `report.html`,
the same run with its flips, curves and funnel, written beside it by `report/html.py`).

It only *reads* what the phases wrote — the pre-evaluation summary and the delta report, typed
(`read_record`), and the run state and gate verdict, which the loop hands over already read
typed — and stamps the machine and package versions; it computes no statistic of its own. A
section whose artifact does not exist says "not measured" rather than leaving a gap.

The result is followed by the delta report's regression diagnosis ("Why items got worse",
`report/diagnosis.py`), in the words of delta.md (`markdown.diagnosis_lines`).

A cascade round's `## Cascade` (the composition, its frontier, and the answers per tier and
cost per item on the gate slice) is `report/cascade_section.py`'s, which report.html shares.

Run by the loop's `capstone` phase (`loop/adapters.run_capstone`, inputs unpacked in
`loop/handover.py`). It takes the state and the verdict through read-only protocols rather
than their classes, so that this phase imports neither the loop nor the gate.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tuneloop.config import LoopConfig, TrainConfig
from tuneloop.provenance import stamp
from tuneloop.records import atomic_write_text, read_record_if_exists
from tuneloop.records.portfolio_table import (
    challenger_cells,
    choice_sentence,
    header,
    markdown_table,
    summary_line,
)
from tuneloop.records.replay import ReplayReport
from tuneloop.records.run import RunView
from tuneloop.records.selection import PortfolioRecord
from tuneloop.report.cascade_section import cascade_lines, cascade_section
from tuneloop.report.html import HTML_FILE, write_run_html
from tuneloop.report.inputs import CapstoneInputs, VerdictView
from tuneloop.report.markdown import diagnosis_lines
from tuneloop.report.record import DeltaReport
from tuneloop.samplelog import EvalSummary

NO_DIAGNOSIS = [
    "## Why items got worse (diagnosis)",
    "",
    "not measured: the delta report predates the diagnosis; `tuneloop run CONFIG --only report`, "
    "then `--only capstone`, recomputes it",
    "",
]
"""report.md's diagnosis section when delta.json has none (written before it existed)."""


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _pp(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:+.1f} pts"


def _short(digest: str | None) -> str:
    return f"{digest[:16]}…" if digest else "n/a"


def _inputs(cfg: LoopConfig, inp: CapstoneInputs) -> list[str]:
    pre = read_record_if_exists(inp.pre_summary, EvalSummary)
    t = cfg.train
    lines = [
        "## Pinned inputs",
        "",
        f"- Base model: `{cfg.base_model}` (sha256 `{_short(inp.base_model_sha256)}`)",
    ]
    if pre is None:
        lines.append(f"- Suite: `{cfg.suite.path}`: not measured (no `{inp.pre_summary}`)")
    else:
        s = pre.sampling
        lines += [
            f"- Suite: `{cfg.suite.path}`, revision `{pre.suite_revision[:16]}…`, "
            f"{len(pre.item_ids)} items evaluated; slices {cfg.suite.slices}",
            f"- Sampling (pre and post): {s.n_samples} sample(s)/item, "
            f"temperature {s.temperature}, top_p {s.top_p}, "
            f"max_tokens {s.max_tokens}, seed {s.seed}",
        ]
    if cfg.merge.zero_adapter:
        lines.append("- Training: none — zero-adapter control arm (base passed through merge)")
        return [*lines, ""]
    lines.append(f"- Training data: `{inp.train_data}` (sha256 `{_short(inp.train_data_sha256)}`)")
    if inp.corpus_provenance.exists():
        lines.append(f"  - built from traces; provenance: `{inp.corpus_provenance}`")
    lines.append(
        f"- Method: {t.method}, {_steps(t)}, lr {t.learning_rate}, batch {t.batch_size}, "
        + (f"LoRA r={t.lora.r} alpha={t.lora.alpha}" if t.adapter == "lora" else "full fine-tuning")
        + f", seed {t.seed}"
        + (
            f", GRPO group {t.grpo.group_size}, loss {t.grpo.loss_type}, beta {t.grpo.beta}"
            if t.method == "grpo"
            else ""
        )
        + (f", SFT warm-up {t.sft_warmup_steps} steps" if t.sft_warmup_steps else "")
    )
    if inp.trained is not None and inp.trained[0] is not None:
        steps, seconds, stop = inp.trained
        took = f" in {seconds:.1f} s" if seconds is not None else ""
        after = f" after the warm-up's {t.sft_warmup_steps}" if t.sft_warmup_steps else ""
        lines.append(f"  - trained: {steps} {t.method} steps{after}{took}, stopped by {stop}")
    if inp.train_settings.exists():
        lines.append(f"  - resolved settings: `{inp.train_settings}`")
    if inp.walk_back is not None:
        w = inp.walk_back
        lines.append(f"  - **{w.line()}**; it passed: {', '.join(w.checks)}")
    return [*lines, ""]


def _steps(t: TrainConfig) -> str:
    """The step budget as configured: a count, or a count bound and a clock."""
    if t.max_seconds is None:
        return f"{t.steps} steps"
    return f"up to {t.steps} steps or {t.max_seconds:g} s"


def _replay(inp: CapstoneInputs) -> list[str]:
    if inp.replay_report is None:
        return []
    r = read_record_if_exists(inp.replay_report, ReplayReport)
    head = ["## Teacher replay", ""]
    if r is None:
        return [*head, f"not measured (no `{inp.replay_report}`)", ""]
    lines = [
        *head,
        f"- Report: `{inp.replay_report}` (sha256 `{_short(inp.replay_report_sha256)}`)",
        f"- {r.steps_planned} of {r.steps_available} steps replayed from `{r.traces}`; "
        f"{r.sft_rows} distillation rows, {r.dpo_pairs} pairs; cost {r.cost_usd:.6f} USD "
        f"({r.cost_usd_this_run:.6f} this run)",
        "",
        "| teacher | pass rate | 95% Wilson CI | scored | missing | cost (USD) |",
        "|---|---|---|---|---|---|",
    ]
    for t in r.teachers:
        ci = f"{_pct(t.wilson_ci[0])}–{_pct(t.wilson_ci[1])}" if t.wilson_ci else "n/a"
        lines.append(
            f"| {t.name} | {_pct(t.pass_rate)} | {ci} | {t.scored} | {t.missing} "
            f"| {t.cost_usd:.6f} |"
        )
    return [*lines, ""]


def _result(inp: CapstoneInputs, out: Path) -> list[str]:
    d = read_record_if_exists(inp.delta, DeltaReport)
    if d is None:
        return ["## Result", "", "not measured (no delta report)", ""]
    lo, hi = d.delta_ci
    f, s = d.flips, d.settings
    figures = Path(os.path.relpath(inp.delta.parent, out.parent)).as_posix()
    return [
        "## Result (report slice: every evaluated item except the gate slice)",
        "",
        "| | pre | post |",
        "|---|---|---|",
        f"| mean item score | {_pct(d.pre.mean)} | {_pct(d.post.mean)} |",
        f"| Wilson CI | {_pct(d.pre.wilson_ci[0])}–{_pct(d.pre.wilson_ci[1])} "
        f"| {_pct(d.post.wilson_ci[0])}–{_pct(d.post.wilson_ci[1])} |",
        f"| missing / harness errors | {d.pre.missing} / {d.pre.harness_error} "
        f"| {d.post.missing} / {d.post.harness_error} |",
        "",
        f"- Paired Δ = **{_pp(d.delta)}** (bootstrap {int(100 * s.confidence)}% "
        f"CI {_pp(lo)} to {_pp(hi)}, {s.n_resamples} resamples, seed {s.seed}), "
        f"n = {d.n_items} items",
        f"- Paired permutation p (two-sided) = {d.p_two_sided:.3g}; one-sided (post > pre) "
        f"= {d.p_greater:.3g} ({d.permutation_method})",
        f"- Exact sign test on changed items: {d.sign_wins} up, {d.sign_losses} down, "
        f"p = {d.sign_p_two_sided:.3g}",
        f"- Cohen's d_z = {d.d_z if d.d_z is None else round(d.d_z, 3)}; "
        f"MDE at this n = {_pp(d.mde)}",
        f"- Flips (right = item score ≥ {f.threshold}): wrong→right {f.wrong_to_right}, "
        f"right→wrong {f.right_to_wrong}",
        "",
        f"![pass@k]({figures}/passk.png) ![items]({figures}/items.png)",
        "",
        *(diagnosis_lines(d.diagnosis) if d.diagnosis is not None else NO_DIAGNOSIS),
    ]


def _steps_added(cfg: LoopConfig, inp: CapstoneInputs) -> list[str]:
    """Base → SFT warm-up → trained model on the report items, when the round measured it."""
    if inp.steps is None:
        return []
    head = [
        "## What each training step added (report slice)",
        "",
        "| step | from → to | paired Δ | 95% CI | p (two-sided) | fixed / broken |",
        "|---|---|---|---|---|---|",
    ]
    rows = []
    names = (f"SFT warm-up ({cfg.train.sft_warmup_steps} steps)", f"{cfg.train.method} after it")
    for name, path in zip(names, inp.steps, strict=True):
        d = read_record_if_exists(path, DeltaReport)
        if d is None:
            rows.append(f"| {name} | not measured (no `{path}`) | | | | |")
            continue
        lo, hi = d.delta_ci
        rows.append(
            f"| {name} | {_pct(d.pre.mean)} → {_pct(d.post.mean)} | {_pp(d.delta)} "
            f"| {_pp(lo)} to {_pp(hi)} | {d.p_two_sided:.3g} "
            f"| {d.flips.wrong_to_right} / {d.flips.right_to_wrong} |"
        )
    return [*head, *rows, ""]


def _challengers(inp: CapstoneInputs) -> list[str]:
    """A portfolio round's challengers: the rule, slice, budget and approval; one row each
    (the selected one in bold, a failed one with its error); the choice and its reason."""
    if inp.portfolio is None:
        return []
    record = read_record_if_exists(inp.portfolio, PortfolioRecord)
    head = ["## Challengers", ""]
    if record is None:
        return [*head, f"not measured (no `{inp.portfolio}`)", ""]
    rows = [
        [f"**{cells[0]}**", *cells[1:]] if c.selected else cells
        for c, cells in zip(record.challengers, challenger_cells(record), strict=True)
    ]
    return [
        *head,
        f"- {summary_line(record)}",
        f"- Record: `{inp.portfolio}`",
        "",
        *markdown_table(header(record), rows),
        "",
        choice_sentence(record),
        "",
    ]


def _verdict(cfg: LoopConfig, v: VerdictView | None) -> list[str]:
    if not cfg.gate.enabled:
        return ["## Gate", "", "off (gate.enabled: false)", ""]
    if v is None:
        return ["## Gate", "", "not run", ""]
    lines = [
        "## Gate",
        "",
        f"**{v.decision}** on slice `{v.slice}` "
        f"(champion {_pct(v.champion.mean)} → challenger {_pct(v.challenger.mean)})",
        "",
        f"Bar (pre-registered in the config): `{json.dumps(dict(v.bar))}`",
        "",
    ]
    lines += [f"- {'✓' if c.passed else '✗'} {c.name}: {c.detail}" for c in v.conditions]
    if v.judge is not None:  # an LLM judge scored the slice: its calibration beside the Δ
        lines += ["", v.judge.sentence()]
    lines += [
        "",
        f"Bar sealed in the ledger at {v.sealed_at or 'n/a'}, before the post evaluation; "
        f"evidence `{(v.evidence_sha256 or 'n/a')[:16]}` (both logs, both models, bar, "
        "items). The champion changes only in the `promote` phase, after this run's archive "
        "verifies (`promote/promotion.json`).",
    ]
    return [*lines, ""]


def _timings(run: RunView, this_phase: str) -> list[str]:
    lines = ["## Phases", "", "| phase | status | seconds |", "|---|---|---|"]
    total = 0.0
    for name, rec in run.phases.items():
        dur = rec.duration_s
        total += dur or 0.0
        shown = f"{dur:.1f}" if dur is not None else "—"
        status = "writing this report" if name == this_phase else rec.status
        lines.append(f"| {name} | {status} | {shown} |")
    return [*lines, f"| total phase work | | {total:.1f} |", ""]


def _machine() -> list[str]:
    s = stamp()
    m = s["machine"]
    pk = ", ".join(f"{k} {v}" for k, v in s["packages"].items() if v)
    return [
        "## Machine and versions",
        "",
        f"- {m['platform']}, Python {m['python']}, {m['cpu_count']} CPUs, {m['memory_gb']} GiB, "
        f"GPUs: {', '.join(m['gpus']) or 'none'}",
        f"- {pk}",
        f"- code: git {s['git_commit'] or 'n/a'}; written {s['at']}",
        "",
    ]


def render_capstone(
    cfg: LoopConfig, run: RunView, inputs: CapstoneInputs, verdict: VerdictView | None, out: Path
) -> str:
    """The report's text; `out` is where it will be written (figure links are relative)."""
    lines = [f"# tuneloop run `{run.run_id}` — {cfg.name}", ""]
    lines += _inputs(cfg, inputs)
    lines += _replay(inputs)
    lines += _result(inputs, out)
    lines += _steps_added(cfg, inputs)
    lines += _challengers(inputs)
    lines += cascade_lines(cascade_section(inputs.cascade, verdict), out)
    lines += _verdict(cfg, verdict)
    lines += _timings(run, inputs.this_phase)
    lines += _machine()
    return "\n".join(lines)


def write_capstone(
    out: Path, cfg: LoopConfig, run: RunView, inputs: CapstoneInputs, verdict: VerdictView | None
) -> None:
    """Write `report.md` to `out`, and `report.html` beside it, atomically."""
    atomic_write_text(out, render_capstone(cfg, run, inputs, verdict, out))
    write_run_html(out.with_name(HTML_FILE), cfg, run, inputs, verdict)
