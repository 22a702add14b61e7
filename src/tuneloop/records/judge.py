"""The judge's records: who judged (`JudgeIdentity`), and how well it agrees with people
(`JudgeCalibration`, written by `tuneloop judge calibrate`).

Defined here, in core, because more than one package reads them: the judge scorer names its
identity in each judgement's provenance, the gate refuses a judge whose calibration is missing,
below `min_agreement` or of another identity, and the report shows the calibration beside the
Δ. The figures and their methods are `tuneloop.stats.rater`'s (Cohen 1960 κ, Wilson 1927
intervals, Youden's J and the attenuation of a judged difference, Bross 1954).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from tuneloop.records.base import Record

JudgeMode = Literal["grade", "pairwise"]
AuditFormat = Literal["jsonl", "traffic"]


class JudgeIdentity(BaseModel):
    """What a judgement's provenance names; a calibration holds for exactly this identity."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    """The judge's model id."""
    endpoint: str
    """Where it was asked."""
    mode: JudgeMode
    """grade or pairwise."""
    rubric_sha256: str
    """sha256 of the rubric template's bytes."""
    pass_threshold: float
    """The grade at which an answer passes."""


class Bounds(BaseModel):
    """A two-sided confidence interval."""

    model_config = ConfigDict(extra="forbid")

    low: float
    high: float


class JudgeCalibration(Record):
    """A judge's agreement with human verdicts on a labelled audit set."""

    KIND = "judge_calibration"
    VERSION = 1

    judge: JudgeIdentity
    """The judge measured: a gate with another model, endpoint, mode, rubric or threshold
    needs a new calibration."""
    judge_file: str
    """The judge file as given."""
    judge_file_sha256: str
    """sha256 of the judge file's bytes."""
    audit: str
    """The audit set: a JSONL file of labelled rows, or a traffic-log folder."""
    audit_sha256: str
    """sha256 of the audit file (or of the folder's tree)."""
    audit_format: AuditFormat
    """`jsonl` (rows with a `human` verdict) or `traffic` (exchanges with feedback)."""
    n: int
    """Labelled rows the judge graded: the denominator of every figure."""
    unlabelled: int
    """Rows (or exchanges) without a human verdict, left out."""
    unparsable: list[str] = []
    """Ids of labelled rows the judge gave no parsable judgement for, left out of `n`
    (a judge that goes vague on hard rows would look better without this list)."""
    tp: int
    """Judge pass, human pass."""
    fp: int
    """Judge pass, human fail."""
    tn: int
    """Judge fail, human fail."""
    fn: int
    """Judge fail, human pass."""
    agreement: float
    """(tp + tn) / n."""
    agreement_ci: Bounds
    """Wilson interval of the agreement."""
    kappa: float | None
    """Cohen's κ; None when both raters gave every row the same verdict (κ is 0/0)."""
    fpr: float | None
    """fp / (fp + tn): the judge passes what a person failed; None without a human fail."""
    fpr_ci: Bounds | None
    """Wilson interval of the FPR."""
    fnr: float | None
    """fn / (fn + tp): the judge fails what a person passed; None without a human pass."""
    fnr_ci: Bounds | None
    """Wilson interval of the FNR."""
    youden_j: float | None
    """1 − FPR − FNR: a true difference is observed through this judge as J × itself, so the
    gate's MDE in true units is MDE / J."""
    youden_j_low: float | None
    """1 − FPR_high − FNR_high: a conservative lower bound of J."""
    confidence: float
    """Confidence level of the intervals."""
    min_agreement: float
    """The judge file's least agreement for gating."""
    passed: bool
    """agreement ≥ min_agreement and J > 0: the judge may decide a gate."""
    refusal: str | None = None
    """Why the judge is refused, in words; None when it passed."""
    disagreements: list[str] = []
    """Ids of the rows where judge and person disagree, for a person to read."""
    judge_cost_usd: float | None = None
    """What grading the audit set cost (judgements from the cache at what they cost to make);
    None when the judge reported no usage."""
    created_at: str
    """ISO 8601 UTC time of the calibration."""
