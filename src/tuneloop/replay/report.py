"""The replay report: per-teacher pass rate with a Wilson interval, agreement between
teachers, tokens, cost, latency, and the cost of each usable row. Pure, from the calls.

Denominators, deliberately: a teacher's pass rate counts its scored calls — `ok` and
`malformed` (a malformed answer is the teacher's failure, scored 0) — and leaves out
`missing` calls (an infrastructure failure says nothing about the teacher), `unscored` ones
and scorer errors, each reported by count. This differs from the eval, which counts missing
samples as failures: there the model under test is being judged and missing data must not
flatter it; here teachers are compared on the steps they actually answered. The Wilson
interval is `tuneloop.stats.wilson_interval` (Wilson 1927) at 95%. Agreement between two
teachers is the share of steps, scored for both, that they both pass or both fail.
Latency p95 is the nearest-rank percentile.
"""

from __future__ import annotations

import math
from itertools import combinations

from tuneloop.records.replay import (
    Agreement,
    JudgedSteps,
    ReplayCall,
    ReplayReport,
    TeacherReport,
)
from tuneloop.replay.store import CallId, call_id
from tuneloop.stats import wilson_interval

SCORED = ("ok", "malformed")


def _p95(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def teacher_report(
    name: str, model: str, rows: list[ReplayCall], new: set[CallId]
) -> TeacherReport:
    """One teacher's figures; `new` names the calls answered by this invocation."""
    scored = [r for r in rows if r.status in SCORED and r.passed is not None]
    passed = sum(1 for r in scored if r.passed)
    answered = [r for r in rows if r.status != "missing"]
    latencies = [r.latency_s for r in answered if r.latency_s is not None]
    this_run = [r for r in answered if call_id(r) in new]
    return TeacherReport(
        name=name,
        model=model,
        planned=len(rows),
        scored=len(scored),
        passed=passed,
        pass_rate=passed / len(scored) if scored else None,
        wilson_ci=wilson_interval(passed, len(scored)) if scored else None,
        missing=sum(1 for r in rows if r.status == "missing"),
        malformed=sum(1 for r in rows if r.status == "malformed"),
        unscored=sum(1 for r in rows if r.status == "unscored"),
        scorer_errors=sum(1 for r in rows if r.status == "scorer_error"),
        prompt_tokens=sum(r.prompt_tokens or 0 for r in answered),
        completion_tokens=sum(r.completion_tokens or 0 for r in answered),
        calls_without_usage=sum(1 for r in answered if r.cost_usd is None),
        cost_usd=sum(r.cost_usd or 0.0 for r in answered),
        calls_this_run=len(this_run),
        cost_usd_this_run=sum(r.cost_usd or 0.0 for r in this_run),
        latency_mean_s=sum(latencies) / len(latencies) if latencies else None,
        latency_p95_s=_p95(latencies),
    )


def agreement(a: str, b: str, rows: list[ReplayCall]) -> Agreement:
    """How often teachers a and b both pass or both fail the steps scored for both."""
    verdicts: dict[str, dict[tuple[str, int], bool]] = {a: {}, b: {}}
    for r in rows:
        if r.teacher in verdicts and r.status in SCORED and r.passed is not None:
            verdicts[r.teacher][(r.trace, r.step)] = r.passed
    both = verdicts[a].keys() & verdicts[b].keys()
    agree = sum(1 for k in both if verdicts[a][k] == verdicts[b][k])
    return Agreement(
        a=a, b=b, steps=len(both), agree=agree, rate=agree / len(both) if both else None
    )


def pairwise(names: list[str], rows: list[ReplayCall]) -> list[Agreement]:
    return [agreement(a, b, rows) for a, b in combinations(names, 2)]


def per_row(cost: float, rows: int) -> float | None:
    return cost / rows if rows else None


def render_markdown(report: ReplayReport) -> str:
    """A short Markdown page of the report, for people."""
    lines = [
        "# Replay report",
        "",
        f"{report.steps_planned} of {report.steps_available} assistant steps replayed from "
        f"`{report.traces}` (fraction {report.sample_fraction:g}, seed {report.seed}).",
        "",
        "| teacher | pass rate (95% Wilson) | scored | missing | malformed | tokens in/out "
        "| cost USD (this run) | latency mean / p95 s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for t in report.teachers:
        rate = (
            f"{t.pass_rate:.3f} [{t.wilson_ci[0]:.3f}, {t.wilson_ci[1]:.3f}]"
            if t.pass_rate is not None and t.wilson_ci is not None
            else "n/a"
        )
        lat = (
            f"{t.latency_mean_s:.3f} / {t.latency_p95_s:.3f}"
            if t.latency_mean_s is not None and t.latency_p95_s is not None
            else "n/a"
        )
        lines.append(
            f"| {t.name} | {rate} | {t.scored} | {t.missing} | {t.malformed} | "
            f"{t.prompt_tokens}/{t.completion_tokens} | "
            f"{t.cost_usd:.6f} ({t.cost_usd_this_run:.6f}) | {lat} |"
        )
    lines += ["", "Agreement (both pass or both fail, on steps scored for both):", ""]
    lines += [
        f"- {g.a} vs {g.b}: {g.agree}/{g.steps}"
        + (f" = {g.rate:.3f}" if g.rate is not None else "")
        for g in report.agreement
    ] or ["- (one teacher)"]
    cost_row = (
        f"{report.cost_per_usable_row:.6f}" if report.cost_per_usable_row is not None else "n/a"
    )
    lines += [
        "",
        f"Rows: {report.sft_rows} SFT, {report.dpo_pairs} DPO pairs; cost {report.cost_usd:.6f} "
        f"USD ({report.cost_usd_this_run:.6f} this run, {report.calls_this_run} calls; "
        f"{report.calls_reused} reused), {cost_row} USD per usable row.",
        *[
            f"Reused from an earlier replay's log: {n} calls from {path}."
            for path, n in report.reused_from.items()
        ],
        "",
        f"Original responses: {report.original_passed}/{report.original_scored} passed. "
        f"Tie rule: {report.tie_rule}.",
    ]
    if report.judged is not None:
        lines += ["", judged_line(report.judged)]
    return "\n".join(lines) + "\n"


def judged_line(j: JudgedSteps) -> str:
    """One sentence on the step judge: what it scored, its errors and cost, what came of it."""
    who = j.scorer + (f" ({j.mode}, {j.model})" if j.mode is not None else "")
    return (
        f"Judged by {who}: {j.steps} steps without a verifier, {j.calls_scored} teacher "
        f"answers and {j.originals_scored} originals scored, {j.errors} judge errors, "
        f"judge cost {j.cost_usd:.6f} USD → {j.sft_rows} SFT rows, {j.dpo_pairs} DPO pairs."
    )
