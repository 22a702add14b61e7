"""May this judge decide a gate? Its calibration record, checked against the judge itself.

    problem = gating_refusal(judge)        # None, or why the gate may not use it
    calibration = read_calibration(judge)  # the record (None: the judge file names none)

A judge may decide a gate only with a calibration record (`tuneloop judge calibrate`) that
measured this very judge — the same model, endpoint, mode, rubric bytes and pass threshold —
and found it at the judge file's `min_agreement` or better with Youden's J > 0. Anything else
is refused with the figures and the command that fixes it: a judge nobody measured, or one
measured below the bar, must not promote a model.
"""

from __future__ import annotations

from tuneloop.errors import InputError
from tuneloop.records import read_record
from tuneloop.records.judge import JudgeCalibration
from tuneloop.scorers.judge.judge import Judge


def read_calibration(judge: Judge) -> JudgeCalibration | None:
    """The judge file's calibration record; None when it names none or the file is absent;
    InputError naming the file when it cannot be read as one."""
    path = judge.spec.calibration
    if path is None or not path.is_file():
        return None
    return read_record(path, JudgeCalibration)


def gating_refusal(judge: Judge) -> str | None:
    """Why `judge` may not decide a gate, in words; None when it may."""
    spec, how = judge.spec, "run `tuneloop judge calibrate --judge <judge file> --audit <labels>`"
    if spec.calibration is None:
        return f"judge {spec.model!r} names no `calibration` record: {how}"
    try:
        record = read_calibration(judge)
    except InputError as err:
        return f"judge {spec.model!r}: {err}"
    if record is None:
        return f"judge {spec.model!r}: calibration {spec.calibration} not found: {how}"
    if record.judge != judge.identity:
        changed = sorted(
            key
            for key, value in judge.identity.model_dump().items()
            if getattr(record.judge, key) != value
        )
        return (
            f"judge {spec.model!r}: calibration {spec.calibration} measured another judge "
            f"(changed since: {', '.join(changed)}): {how}"
        )
    if record.agreement < spec.min_agreement or not (record.youden_j or 0) > 0:
        kappa = "n/a" if record.kappa is None else f"{record.kappa:.3f}"
        j = "n/a" if record.youden_j is None else f"{record.youden_j:.3f}"
        return (
            f"judge {spec.model!r} is not calibrated for gating: agreement "
            f"{record.agreement:.3f} with people on {record.n} items (κ {kappa}, J {j}), "
            f"below min_agreement {spec.min_agreement:g}"
            + (" or J ≤ 0" if record.agreement >= spec.min_agreement else "")
        )
    return None
