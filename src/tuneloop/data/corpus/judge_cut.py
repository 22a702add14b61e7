"""The judge cut: unlabelled traffic rows kept by an LLM judge's grade (`judge:` in corpus.yaml).

    judge: {file: judges/support.yaml, min_grade: 0.7, concurrency: 4}

Which rows: those no label speaks for — no feedback score, no logged reference, no user's
correction (`unlabelled`). Rated rows stay with the feedback filter and referenced rows with
their reference; with `judge:` set the feedback filter spares the unlabelled rows (so
`filter.keep_unrated` then speaks only of unrated rows that carry a reference) and this step
decides them. It runs after the filter, dedup and decontamination: only their survivors cost
judge calls, and a row that contains a suite item is never shown to the judge.

Each row's last assistant message (its text and tool calls) is graded (`Judge.grade`) given
the conversation before it, with no reference (traffic has none: the rubric's `reference` is
""), by a small thread pool (the judge is thread-safe). A row is kept when its grade is at
least `min_grade` (default: the judge file's `pass_threshold`) and carries the grade and the
judge's model and rubric sha256 (`RowJudgement`, the row's `judge`). A row the judge could not
grade — unparsable after its re-asks, unreachable after its retries (`JudgeError`) — is
dropped under its own step, `judge_errors`, and counted apart: never kept ungraded. A judge
that refuses (401/403/404: a wrong endpoint, key or model) stops the build with nothing
written, as it stops an eval. Judgements are cached by request (`scorers/judge/cache.py`): a
rebuild asks nothing twice, and `cost_usd` counts what the judgements cost to make,
`cost_usd_this_run` what this build paid.

Deliberately grade mode only: a pairwise judge compares two answers, and a traffic row has one.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuneloop.data.corpus.config import JudgeCutSpec
from tuneloop.data.corpus.steps import Build
from tuneloop.data.corpus.training_rows import Row, RowJudgement
from tuneloop.errors import InputError
from tuneloop.records import sha256_file
from tuneloop.scorers.judge import (
    Judge,
    JudgeError,
    JudgeRefused,
    answer_text,
    load_judge,
    load_judge_spec,
)


@dataclass(frozen=True)
class Grade:
    """The judge's answer about one row."""

    value: float | None
    """The grade in [0, 1]; None when the judge could not grade it."""
    cost_usd: float | None
    """What the judgement cost to make (None: no usage reported, or no judgement)."""
    cached: bool
    """Read from the judge's cache: nothing was asked this time."""
    error: str | None = None
    """Why there is no grade (`JudgeUnparsable: …`, `JudgeUnavailable: …`)."""


def unlabelled(row: Row) -> bool:
    """No feedback score and no reference (a correction scores its row 1): the judge's rows."""
    return row.score is None and row.reference is None


def judge_problems(spec: JudgeCutSpec) -> list[str]:
    """`judge.file: …` for a judge file this build cannot use (its problems, or pairwise)."""
    if not spec.file.is_file():
        return [f"judge.file: {spec.file}: judge file not found"]
    try:
        judge = load_judge_spec(spec.file)
    except InputError as err:
        return [f"judge.file: {err}".replace("\n  ", "\n    ")]
    if judge.mode != "grade":
        return [f"judge.file: {spec.file}: mode {judge.mode}; the corpus cut needs mode grade"]
    return []


def grade_rows(judge: Judge, rows: list[Row], concurrency: int) -> list[Grade]:
    """Each row's grade, in order, `concurrency` requests at a time; a refusing judge raises
    InputError (the rest are cancelled)."""

    def one(row: Row) -> Grade:
        try:
            got = judge.grade(row.messages[:-1], answer_text(row.messages[-1]))
        except JudgeRefused:
            raise
        except JudgeError as err:
            return Grade(None, None, False, f"{type(err).__name__}: {err}")
        return Grade(got.value, got.cost_usd, got.cached)

    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="judge") as pool:
        futures = [pool.submit(one, row) for row in rows]
        try:
            return [f.result() for f in futures]
        except JudgeRefused as err:
            pool.shutdown(cancel_futures=True)
            raise InputError(f"judge.file: judge refused: {err}; nothing written") from None


def cut(grades: list[Grade], min_grade: float) -> tuple[dict[int, str], dict[int, str]]:
    """(index → reason) of the rows the judge could not grade, and of those graded below
    `min_grade`: a pure rule over the grades."""
    errors = {i: f"judge error: {g.error}" for i, g in enumerate(grades) if g.value is None}
    below = {
        i: f"judge grade {g.value:g} < judge.min_grade {min_grade:g}"
        for i, g in enumerate(grades)
        if g.value is not None and g.value < min_grade
    }
    return errors, below


def apply_judge(b: Build, spec: JudgeCutSpec) -> None:
    """Grade the build's unlabelled rows; drop those not kept (steps `judge_errors`, then
    `judge`), tag the kept ones, and record the cut in `b.judge_cut`."""
    judge = load_judge(spec.file)
    try:
        asked = [r for r in b.rows if unlabelled(r)]
        grades = grade_rows(judge, asked, spec.concurrency)
    finally:
        judge.close()
    min_grade = spec.min_grade if spec.min_grade is not None else judge.spec.pass_threshold
    errors, below = cut(grades, min_grade)
    for row, grade in zip(asked, grades, strict=True):
        if grade.value is not None and grade.value >= min_grade:
            row.judged = RowJudgement(grade.value, judge.spec.model, judge.rubric.sha256)
    b.judge_cut = summary(judge, spec.file, min_grade, grades, (len(errors), len(below)))
    for step, gone in (("judge_errors", errors), ("judge", below)):
        # by identity: each `drop` renumbers the rows
        reasons = {id(asked[k]): why for k, why in gone.items()}
        b.drop(step, {i: reasons[id(r)] for i, r in enumerate(b.rows) if id(r) in reasons})


def summary(
    judge: Judge, path: Path, min_grade: float, grades: list[Grade], dropped: tuple[int, int]
) -> dict[str, Any]:
    """The cut as provenance.json records it (`records.corpus.JudgeCut`)."""
    errors, below = dropped
    made = [g for g in grades if g.value is not None]
    return {
        "file": str(path),
        "sha256": sha256_file(path),
        "model": judge.spec.model,
        "endpoint": judge.spec.endpoint,
        "rubric_sha256": judge.rubric.sha256,
        "min_grade": min_grade,
        "asked": len(grades),
        "kept": len(grades) - errors - below,
        "below_grade": below,
        "errors": errors,
        "cached": sum(1 for g in made if g.cached),
        "cost_usd": sum(g.cost_usd or 0.0 for g in made),
        "cost_usd_this_run": sum(g.cost_usd or 0.0 for g in made if not g.cached),
    }
