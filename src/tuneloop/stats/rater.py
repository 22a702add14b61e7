"""Agreement of a binary judge with human labels, and what the judge's error does to a gate.

Pure functions over two equal-length lists of booleans, "positive" = pass. Run the checks with
`pytest tests/stats/test_rater.py`.

    a = rater_agreement(judge=[True, False, True], human=[True, True, True])
    a.kappa, a.fpr, a.fpr_ci, a.youden_j
    attenuated_mde(0.04, a.youden_j)     # the smallest true difference a judged gate can see

Methods:
- Confusion counts tp, fp, tn, fn: the judge's verdict against the human label, positive = pass.
- Observed agreement p_o = (tp + tn) / n, with a Wilson interval (Wilson 1927; `proportions`).
- Cohen's κ = (p_o − p_e) / (1 − p_e), p_e the agreement expected from the two raters'
  marginals (Cohen 1960). For a 2×2 table this is computed exactly from the counts as
  κ = 2(tp·tn − fn·fp) / ((tp + fp)(fp + tn) + (tp + fn)(fn + tn)), the same quantity with
  n² cleared from numerator and denominator, so no rounding enters before the last division.
  κ_max is the largest κ the two raters' marginals allow (Cohen 1960, p. 42).
- False-positive rate FPR = fp / (fp + tn) (judge passes | human fails) and false-negative
  rate FNR = fn / (fn + tp) (judge fails | human passes), each with a Wilson interval;
  sensitivity = 1 − FNR, specificity = 1 − FPR, Youden's J = sensitivity + specificity − 1
  (Youden 1950).
- Attenuation: a scorer that misclassifies a sample's pass with those rates turns a true pass
  rate p into an observed p_obs = (1 − spec) + J·p, so a paired difference between two arms
  judged by it is observed as J × the true difference (Bross 1954, non-differential
  misclassification). Hence `corrected_difference` = Δ_obs / J, the corrected pass rate
  p = (p_obs + spec − 1) / J (Rogan & Gladen 1978), and `attenuated_mde` = MDE_obs / J, the
  smallest *true* difference the gate can detect through this judge.

Deliberate choices and their costs:
- Undefined figures are None, never nan or a ZeroDivisionError: FPR and specificity without a
  human fail, FNR and sensitivity without a human pass, J when either is missing, and κ when
  p_e = 1 (both raters gave one and the same verdict to every row; κ is 0/0 there, and
  scikit-learn's `cohen_kappa_score` returns nan). A record can hold None; it cannot hold nan.
- The correction assumes the judge errs at the same rates on both arms (non-differential). A
  judge that favours one model's style breaks that, and no correction here can see it.
- `youden_j_low` = 1 − FPR_high − FNR_high is a conservative bound from the two Wilson upper
  bounds: each at `confidence`, jointly at least 1 − 2(1 − confidence) by the union bound. The
  gate may divide by it instead of J to carry the uncertainty of J itself; the point estimate
  J ignores it.
- The Rogan–Gladen estimate can fall outside [0, 1] by sampling error; it is clipped there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from tuneloop.stats.proportions import wilson_interval


class Interval(NamedTuple):
    """A two-sided confidence interval."""

    low: float
    high: float


@dataclass(frozen=True)
class RaterAgreement:
    """How a binary judge agrees with human labels (module docstring for each method)."""

    n: int
    """Rows rated by both."""
    tp: int
    """Judge pass, human pass."""
    fp: int
    """Judge pass, human fail."""
    tn: int
    """Judge fail, human fail."""
    fn: int
    """Judge fail, human pass."""
    agreement: float
    """Observed agreement p_o = (tp + tn) / n."""
    agreement_ci: Interval
    """Wilson interval of the agreement."""
    expected_agreement: float
    """p_e: the agreement the two raters' marginals give by chance."""
    kappa: float | None
    """Cohen's κ; None when p_e = 1 (both gave every row the same verdict)."""
    kappa_max: float | None
    """The largest κ the marginals allow; None when κ is undefined."""
    fpr: float | None
    """fp / (fp + tn): the judge passes what a person failed; None without a human fail."""
    fpr_ci: Interval | None
    """Wilson interval of the FPR."""
    fnr: float | None
    """fn / (fn + tp): the judge fails what a person passed; None without a human pass."""
    fnr_ci: Interval | None
    """Wilson interval of the FNR."""
    sensitivity: float | None
    """1 − FNR."""
    specificity: float | None
    """1 − FPR."""
    youden_j: float | None
    """sensitivity + specificity − 1, in [−1, 1]: the attenuation factor of a difference."""
    youden_j_low: float | None
    """1 − FPR_high − FNR_high: a conservative lower bound of J (module docstring)."""
    confidence: float
    """Confidence level of every interval."""


def rater_agreement(
    judge: Sequence[bool], human: Sequence[bool], confidence: float = 0.95
) -> RaterAgreement:
    """Confusion counts, agreement, κ, FPR/FNR with Wilson intervals and Youden's J of
    `judge` against `human` (same order, positive = pass). ValueError for no rows or
    lists of different lengths."""
    if len(judge) != len(human):
        raise ValueError(f"judge and human must be one length, got {len(judge)} and {len(human)}")
    if not judge:
        raise ValueError("rater_agreement needs at least one rated row")
    pairs = [(bool(j), bool(h)) for j, h in zip(judge, human, strict=True)]
    tp = sum(1 for j, h in pairs if j and h)
    fp = sum(1 for j, h in pairs if j and not h)
    tn = sum(1 for j, h in pairs if not j and not h)
    fn = sum(1 for j, h in pairs if not j and h)
    return agreement_from_counts(tp, fp, tn, fn, confidence)


def agreement_from_counts(
    tp: int, fp: int, tn: int, fn: int, confidence: float = 0.95
) -> RaterAgreement:
    """`rater_agreement` from the confusion counts alone."""
    if min(tp, fp, tn, fn) < 0:
        raise ValueError(f"counts must be >= 0, got tp={tp} fp={fp} tn={tn} fn={fn}")
    n = tp + fp + tn + fn
    if n == 0:
        raise ValueError("rater_agreement needs at least one rated row")
    fpr = _rate(fp, fp + tn, confidence)
    fnr = _rate(fn, fn + tp, confidence)
    kappa, kappa_max = _kappa(tp, fp, tn, fn)
    judge_pass, human_pass = tp + fp, tp + fn
    expected = (judge_pass * human_pass + (n - judge_pass) * (n - human_pass)) / n**2
    return RaterAgreement(
        n=n,
        tp=tp,
        fp=fp,
        tn=tn,
        fn=fn,
        agreement=(tp + tn) / n,
        agreement_ci=Interval(*wilson_interval(tp + tn, n, confidence)),
        expected_agreement=expected,
        kappa=kappa,
        kappa_max=kappa_max,
        fpr=None if fpr is None else fpr.value,
        fpr_ci=None if fpr is None else fpr.ci,
        fnr=None if fnr is None else fnr.value,
        fnr_ci=None if fnr is None else fnr.ci,
        sensitivity=None if fnr is None else 1.0 - fnr.value,
        specificity=None if fpr is None else 1.0 - fpr.value,
        youden_j=None if fpr is None or fnr is None else 1.0 - fpr.value - fnr.value,
        youden_j_low=None if fpr is None or fnr is None else 1.0 - fpr.ci.high - fnr.ci.high,
        confidence=confidence,
    )


class _Rate(NamedTuple):
    value: float
    ci: Interval


def _rate(errors: int, total: int, confidence: float) -> _Rate | None:
    """errors / total with its Wilson interval; None when total is 0 (undefined)."""
    if total == 0:
        return None
    return _Rate(errors / total, Interval(*wilson_interval(errors, total, confidence)))


def _kappa(tp: int, fp: int, tn: int, fn: int) -> tuple[float | None, float | None]:
    """(κ, κ_max) from the counts, exactly (module docstring); (None, None) when p_e = 1."""
    # n²(1 − p_e) = (tp + fp)(fp + tn) + (tp + fn)(fn + tn): zero iff p_e = 1
    denominator = (tp + fp) * (fp + tn) + (tp + fn) * (fn + tn)
    if denominator == 0:
        return None, None
    kappa = 2.0 * (tp * tn - fn * fp) / denominator
    # κ_max: the table with the same marginals and the most agreement, min of each class's
    # two marginals on the diagonal (Cohen 1960)
    n = tp + fp + tn + fn
    judge_pass, human_pass = tp + fp, tp + fn
    top = min(judge_pass, human_pass)
    bottom = min(n - judge_pass, n - human_pass)
    off = (judge_pass - top, human_pass - top)  # one of the two is 0
    kappa_max = 2.0 * (top * bottom - off[0] * off[1]) / denominator
    return kappa, kappa_max


def corrected_difference(delta_obs: float, j: float) -> float:
    """The true paired difference behind an observed one, Δ_obs / J (Bross 1954).

    ValueError when J is not in (0, 1]: a judge no better than chance (J ≤ 0) carries no
    information about the difference, and J > 1 is not a Youden index."""
    if not 0.0 < j <= 1.0:
        raise ValueError(f"the correction needs Youden's J in (0, 1], got {j}")
    return delta_obs / j


def corrected_pass_rate(p_obs: float, sensitivity: float, specificity: float) -> float:
    """The true pass rate behind an observed one, (p_obs + spec − 1) / J (Rogan & Gladen
    1978), clipped to [0, 1]. ValueError when J = sens + spec − 1 is not positive."""
    j = sensitivity + specificity - 1.0
    if j <= 0.0:
        raise ValueError(f"the correction needs Youden's J > 0, got {j}")
    return min(1.0, max(0.0, (p_obs + specificity - 1.0) / j))


def attenuated_mde(mde_obs: float, j: float | None) -> float:
    """The smallest true difference detectable through the judge, MDE_obs / J; inf when J ≤ 0
    or unknown (None): such a judge cannot show any difference."""
    if j is None or j <= 0.0 or math.isnan(j):
        return math.inf
    return mde_obs / min(j, 1.0)
