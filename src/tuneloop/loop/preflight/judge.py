"""Preflight of an LLM judge: the judge file, whether the gate may use it, and what its
measured error does to the gate's power.

A suite whose items are scored `judge` (or a `gate.scorer: judge`) needs `eval.judge`; the
judge file is checked like every input (`scorers.judge.load_judge`: schema, rubric, key). A
gate decided by the judge needs the judge calibrated (`scorers.judge.gating_refusal`): an
error before compute, with the figures, never a warning. `judge_attenuation` is the factor
the power check divides the MDE by: a judge that passes what people fail (FPR) and fails what
they pass (FNR) shows a true difference Δ as J·Δ, J = 1 − FPR − FNR (Bross 1954), so the
smallest true improvement the gate can see is MDE / J.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from tuneloop.errors import InputError
from tuneloop.loop.preflight.findings import Findings
from tuneloop.suite import Suite

if TYPE_CHECKING:
    from tuneloop.config import LoopConfig
    from tuneloop.gate.verdict_record import JudgeNote

JUDGE = "judge"


class Attenuation(NamedTuple):
    j: float
    """Youden's J of the judge's calibration."""
    source: str
    """Where it came from, in words."""


def judged(cfg: LoopConfig, suite: Suite | None) -> bool:
    """Whether the gate's scores come from the LLM judge."""
    if cfg.gate.scorer is not None:
        return cfg.gate.scorer == JUDGE
    return suite is not None and any(item.scorer == JUDGE for item in suite.items)


def check_judge(cfg: LoopConfig, suite: Suite | None, found: Findings) -> None:
    """The judge file, and the judge's right to decide the gate."""
    uses = judged(cfg, suite) or JUDGE in cfg.eval.metrics
    if cfg.eval.judge is None:
        if uses:
            found.error(
                "eval.judge",
                "items are scored `judge` but no judge file is named; set eval.judge",
            )
        return
    from tuneloop.scorers.judge import gating_refusal, judge_for

    try:
        judge = judge_for(cfg.eval.judge)
    except InputError as err:
        found.error("eval.judge", str(err).replace("\n  ", "\n    "))
        return
    if cfg.gate.enabled and judged(cfg, suite):
        refusal = gating_refusal(judge)
        if refusal is not None:
            found.error("eval.judge", refusal)


def judge_attenuation(cfg: LoopConfig) -> Attenuation | None:
    """The judge's J for the gate's power, when the gate is judged and the judge calibrated."""
    if cfg.eval.judge is None:
        return None
    from tuneloop.scorers.judge import judge_for, read_calibration

    try:
        record = read_calibration(judge_for(cfg.eval.judge))
    except InputError:  # check_judge reports it
        return None
    if record is None or record.youden_j is None:
        return None
    return Attenuation(
        record.youden_j,
        f"the judge's calibration ({record.n} human-labelled items: FPR {_f(record.fpr)}, "
        f"FNR {_f(record.fnr)}, J {record.youden_j:.3f}; Bross 1954)",
    )


def gate_attenuation(cfg: LoopConfig) -> Attenuation | None:
    """`judge_attenuation` when the gate is judged, reading the suite to know (a round's power,
    outside preflight); None when the suite cannot be read (preflight reports it)."""
    if cfg.eval.judge is None:
        return None
    from tuneloop.suite import load_suite

    try:
        suite = load_suite(cfg.suite.path, cfg.suite.default_scorer)
    except InputError:
        return None
    return judge_attenuation(cfg) if judged(cfg, suite) else None


def judge_note(cfg: LoopConfig) -> JudgeNote | None:
    """What the verdict shows beside the Δ of a judged gate: the judge and its calibration
    (None when the gate is not judged)."""
    if gate_attenuation(cfg) is None:
        return None
    from tuneloop.gate.verdict_record import JudgeNote
    from tuneloop.records import sha256_file
    from tuneloop.scorers.judge import judge_for, read_calibration

    assert cfg.eval.judge is not None
    judge = judge_for(cfg.eval.judge)
    record = read_calibration(judge)
    assert record is not None and judge.spec.calibration is not None
    return JudgeNote(
        model=judge.spec.model,
        rubric_sha256=judge.rubric.sha256,
        calibration_sha256=sha256_file(judge.spec.calibration),
        n=record.n,
        agreement=record.agreement,
        kappa=record.kappa,
        fpr=record.fpr,
        fnr=record.fnr,
        youden_j=record.youden_j,
    )


def _f(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
