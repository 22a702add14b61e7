"""Calibrate a judge against people: grade a labelled audit set, measure the agreement.

    tuneloop judge calibrate --judge judge.yaml --audit audit.jsonl [--out calibration.json]
    calibrate(Path("judge.yaml"), Path("audit.jsonl"))        # -> JudgeCalibration

Every labelled row of the audit set (`audit.py`: a JSONL file, or a traffic-log folder whose
feedback verdicts are the labels) is graded by the judge — 8 at a time, cached by request hash
as every judgement is, progress on stderr — and its verdict (grade ≥ the judge file's
`pass_threshold`) is set against the person's: agreement, Cohen's κ, the false-positive and
false-negative rates with Wilson intervals, and Youden's J (`tuneloop.stats.rater`). The
record (`JudgeCalibration`) goes to `--out`, or the judge file's `calibration:` path, written
atomically; the gate reads it there.

A judge is refused for gating when its agreement is below the judge file's `min_agreement`,
and — deliberately, whatever its agreement — when Youden's J is not above 0 or is unmeasured
(the audit set holds no human pass, or no human fail): agreement alone rewards a judge that
passes everything on an audit set that is mostly passes, and through such a judge every
difference the gate looks at is attenuated to nothing (stats/rater.py).

A judgement that does not parse after the judge's re-asks leaves its row out, listed in the
record (`unparsable`) and printed; a refused request (401/403/404: key, endpoint or model
wrong), or a judge with no parsable judgement at all (it answers prose: its rubric or model is
wrong), stops with exit 2 and an unavailable judge with exit 3, nothing written. Only grade
judges are calibrated here: a pairwise judge's verdicts need pairwise human labels.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from tuneloop.errors import (
    InputError,
    PhaseFailed,
    refuse_overwriting_inputs,
    require_writable_dir,
)
from tuneloop.evaluate.audit import Audit, AuditRow, read_audit
from tuneloop.records import sha256_file, sha256_path, write_record
from tuneloop.records.judge import Bounds, JudgeCalibration
from tuneloop.scorers.judge import (
    Judge,
    JudgeError,
    JudgeRefused,
    JudgeUnavailable,
    JudgeUnparsable,
    load_judge,
)
from tuneloop.stats.rater import Interval, RaterAgreement, rater_agreement

WORKERS = 8
"""Judge requests in flight at once."""


@dataclass(frozen=True)
class Graded:
    """The judge's verdict on one audit row."""

    row: AuditRow
    passed: bool | None
    """grade ≥ pass_threshold; None when the judgement did not parse."""
    cost_usd: float | None


def calibrate(
    judge_path: Path,
    audit: Path,
    out: Path | None = None,
    *,
    workers: int = WORKERS,
    progress: bool = True,
) -> JudgeCalibration:
    """Grade the audit set with the judge and write its calibration record (module
    docstring); InputError (exit 2) for bad input, nothing written."""
    judge = load_judge(Path(judge_path))
    try:
        if judge.spec.mode != "grade":
            raise InputError(
                f"{judge_path}: mode: {judge.spec.mode}: only a grade judge is calibrated "
                "against human pass/fail labels"
            )
        target = out or judge.spec.calibration
        if target is None:
            raise InputError(f"{judge_path}: no `calibration:` path in the judge file; give --out")
        refuse_overwriting_inputs([("--out", target)], [judge_path, audit, judge.spec.rubric])
        require_writable_dir(target.parent, "--out")
        read = read_audit(audit)
        if not read.rows:
            raise InputError(
                f"{audit}: no labelled rows ({read.unlabelled} without a human verdict): a row "
                "needs 'human' (JSONL) or a feedback verdict (traffic log)"
            )
        graded = grade_rows(judge, read.rows, workers, _printer(progress, len(read.rows)))
        record = calibration_record(judge, Path(judge_path), Path(audit), read, graded)
        target.parent.mkdir(parents=True, exist_ok=True)
        write_record(target, record)  # atomic: temp file, fsync, rename
        if progress:
            print(f"judge calibrate: wrote {target}", file=sys.stderr, flush=True)
        return record
    finally:
        judge.close()


def grade_rows(
    judge: Judge,
    rows: Sequence[AuditRow],
    workers: int,
    on_done: Callable[[int], None] = lambda done: None,
) -> list[Graded]:
    """Each row graded (in the rows' order); stops at the first refused or unavailable call."""

    def one(row: AuditRow) -> Graded:
        try:
            got = judge.grade(row.messages, row.response, row.reference)
        except JudgeUnparsable:
            return Graded(row, None, None)
        return Graded(row, got.value >= judge.spec.pass_threshold, got.cost_usd)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(one, row) for row in rows]
        try:
            for done, future in enumerate(as_completed(futures), start=1):
                future.result()  # the first refused or unavailable call stops the rest
                on_done(done)
        except JudgeError as err:
            pool.shutdown(cancel_futures=True)
            _raise(err)
    return [f.result() for f in futures]


def _raise(error: JudgeError) -> NoReturn:
    if isinstance(error, JudgeRefused):  # the key, endpoint or model name is wrong
        raise InputError(f"{error} (check the judge file's endpoint, model and api_key_env)")
    if isinstance(error, JudgeUnavailable):
        raise PhaseFailed(str(error))
    raise error


def refusal(agreement: RaterAgreement, min_agreement: float) -> str | None:
    """Why the judge may not decide a gate (module docstring), or None."""
    if agreement.agreement < min_agreement:
        return f"agreement {agreement.agreement:.3f} is below min_agreement {min_agreement:g}"
    if agreement.youden_j is None:
        side = "fail" if agreement.fpr is None else "pass"
        return (
            f"the audit set holds no human {side}: the judge's error on that side is "
            "unmeasured (Youden's J undefined)"
        )
    if agreement.youden_j <= 0:
        return f"Youden's J = {agreement.youden_j:.3f} ≤ 0: the judge is no better than chance"
    return None


def calibration_record(
    judge: Judge, judge_path: Path, audit_path: Path, audit: Audit, graded: list[Graded]
) -> JudgeCalibration:
    """The record of a calibration, from the rows graded."""
    scored = [g for g in graded if g.passed is not None]
    if not scored:
        raise InputError(
            f"judge {judge.spec.model!r} gave no parsable judgement for any of the "
            f"{len(graded)} audit rows: its rubric ({judge.spec.rubric}) must ask for "
            "`SCORE: <0..1>` on the last line; nothing written"
        )
    a = rater_agreement([bool(g.passed) for g in scored], [g.row.human for g in scored])
    costs = [g.cost_usd for g in scored]
    why = refusal(a, judge.spec.min_agreement)
    return JudgeCalibration(
        judge=judge.identity,
        judge_file=str(judge_path),
        judge_file_sha256=sha256_file(judge_path),
        audit=str(audit_path),
        audit_sha256=sha256_path(audit_path),
        audit_format=audit.format,
        n=a.n,
        unlabelled=audit.unlabelled,
        unparsable=[g.row.id for g in graded if g.passed is None],
        tp=a.tp,
        fp=a.fp,
        tn=a.tn,
        fn=a.fn,
        agreement=a.agreement,
        agreement_ci=_bounds(a.agreement_ci),
        kappa=a.kappa,
        fpr=a.fpr,
        fpr_ci=None if a.fpr_ci is None else _bounds(a.fpr_ci),
        fnr=a.fnr,
        fnr_ci=None if a.fnr_ci is None else _bounds(a.fnr_ci),
        youden_j=a.youden_j,
        youden_j_low=a.youden_j_low,
        confidence=a.confidence,
        min_agreement=judge.spec.min_agreement,
        passed=why is None,
        refusal=why,
        disagreements=[g.row.id for g in scored if g.passed != g.row.human],
        judge_cost_usd=None if None in costs else sum(c for c in costs if c is not None),
        created_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    )


def _bounds(interval: Interval) -> Bounds:
    return Bounds(low=interval.low, high=interval.high)


def _printer(enabled: bool, total: int) -> Callable[[int], None]:
    """A progress callback: a line on stderr every tenth of the rows."""
    step = max(1, total // 10)

    def on_done(done: int) -> None:
        if enabled and (done % step == 0 or done == total):
            print(f"judge calibrate: {done}/{total} rows graded", file=sys.stderr, flush=True)

    return on_done


def summary_lines(record: JudgeCalibration) -> list[str]:
    """What `tuneloop judge calibrate` prints: the figures, then PASS or REFUSED."""
    pct = f"{record.confidence:.0%}"
    lines = [
        f"judge {record.judge.model} ({record.judge.mode}, rubric "
        f"{record.judge.rubric_sha256[:12]}) on {record.audit} ({record.audit_format}): "
        f"{record.n} labelled rows, {record.unlabelled} unlabelled left out",
        f"  agreement  {record.agreement:.3f}  {pct} CI {_ci(record.agreement_ci)}  "
        f"(tp {record.tp}, fp {record.fp}, tn {record.tn}, fn {record.fn})",
        f"  kappa      {_num(record.kappa)}  (Cohen 1960)",
        f"  FPR        {_num(record.fpr)}  {pct} CI {_ci(record.fpr_ci)}  "
        "(judge passes what a person failed)",
        f"  FNR        {_num(record.fnr)}  {pct} CI {_ci(record.fnr_ci)}  "
        "(judge fails what a person passed)",
        f"  Youden J   {_num(record.youden_j)}  (a true difference is seen as J × itself)",
    ]
    if record.unparsable:
        lines.append(
            f"  unparsable {len(record.unparsable)} rows left out: {record.unparsable[:5]}"
        )
    if record.passed:
        lines.append(f"PASS: agreement ≥ min_agreement {record.min_agreement:g}")
    else:
        lines.append(f"REFUSED for gating: {record.refusal}")
    return lines


def _num(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.3f}"


def _ci(bounds: Bounds | None) -> str:
    return "—" if bounds is None else f"[{bounds.low:.3f}, {bounds.high:.3f}]"
