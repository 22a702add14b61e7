"""Write a replay's products from its calls: `sft.jsonl`, `dpo.jsonl`, `report.json`,
`report.md`. Each file is written whole (temp file, fsync, rename) and redacted: a teacher
may repeat a key it was shown, and no key is ever written.
"""

from __future__ import annotations

from pathlib import Path

from tuneloop.config.replay import ReplayConfig
from tuneloop.envkeys import Redactor
from tuneloop.records import atomic_write_text, write_json, write_jsonl
from tuneloop.records.replay import ReplayCall, ReplayReport
from tuneloop.replay.judging import JudgeUse, OriginalVerdicts, judged_steps
from tuneloop.replay.plan import Step
from tuneloop.replay.report import pairwise, per_row, render_markdown, teacher_report
from tuneloop.replay.select import TIE_RULE, select_rows
from tuneloop.replay.store import CallId
from tuneloop.replay.teachers import TeachersFile

SFT_FILE = "sft.jsonl"
DPO_FILE = "dpo.jsonl"
REPORT_FILE = "report.json"
REPORT_MD = "report.md"


def write_outputs(
    out_dir: Path,
    redactor: Redactor,
    *,
    steps: list[Step],
    teachers: TeachersFile,
    calls: dict[CallId, ReplayCall],
    new: set[CallId],
    originals: OriginalVerdicts,
    judge: JudgeUse,
    settings: ReplayConfig,
    sources: tuple[str, str, int],
    reused_from: dict[str, int] | None = None,
) -> ReplayReport:
    """Select rows, build the report, write all four files; returns the report."""
    against_original = {s.key for s in steps if judge.pairwise(s)}
    sft, dpo = select_rows(steps, teachers, calls, originals.passed, losses_only=against_original)
    rows = list(calls.values())
    traces, teachers_file, available = sources
    reports = [
        teacher_report(t.name, t.requested_model(), [r for r in rows if r.teacher == t.name], new)
        for t in teachers.teachers
    ]
    cost = sum(t.cost_usd for t in reports)
    scored_originals = [v for v in originals.passed.values() if v is not None]
    report = ReplayReport(
        traces=traces,
        teachers_file=teachers_file,
        steps_available=available,
        steps_planned=len(steps),
        sample_fraction=settings.sample_fraction,
        max_steps=settings.max_steps,
        seed=settings.seed,
        judge=settings.judge,
        judged=judged_steps(steps, rows, originals, (sft, dpo), judge),
        pass_threshold=settings.pass_threshold,
        teachers=reports,
        agreement=pairwise([t.name for t in teachers.teachers], rows),
        original_scored=len(scored_originals),
        original_passed=sum(scored_originals),
        sft_rows=len(sft),
        dpo_pairs=len(dpo),
        tie_rule=TIE_RULE,
        cost_usd=cost,
        cost_usd_this_run=sum(t.cost_usd_this_run for t in reports),
        calls_this_run=sum(t.calls_this_run for t in reports),
        calls_reused=sum(1 for k, r in calls.items() if k not in new and r.status != "missing"),
        reused_from=reused_from or {},
        cost_per_sft_row=per_row(cost, len(sft)),
        cost_per_usable_row=per_row(cost, len(sft) + len(dpo)),
    )
    write_jsonl(out_dir / SFT_FILE, redactor.value(sft))
    write_jsonl(out_dir / DPO_FILE, redactor.value(dpo))
    write_json(out_dir / REPORT_FILE, redactor.value(report.to_json()))
    atomic_write_text(out_dir / REPORT_MD, redactor.text(render_markdown(report)))
    return report
