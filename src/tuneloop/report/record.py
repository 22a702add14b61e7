"""The delta report record (`tuneloop.delta/2`): what `compare` writes to delta.json.

Every number is computed from the two sample logs named in it, by `tuneloop.report.delta`;
the regression diagnosis (`Diagnosis`, version 2) by `tuneloop.report.diagnosis`. A report
without a diagnosis is written as version 1, byte for byte as before, so older readers still
read it; one with a diagnosis is version 2, which they refuse with "upgrade tuneloop".
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from tuneloop.records import Record
from tuneloop.stats.paired import FlipCounts


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class ArmSummary(_Part):
    """One arm (pre or post) of the comparison."""

    model: str
    """Model identity from the sample log (`name@sha256:…` when the weights hash is known)."""
    log: str | None = None
    """The sample-log folder read (None when computed from data in memory)."""
    mean: float
    """Mean item score (each item's score is the mean of its samples; missing = 0)."""
    wilson_ci: tuple[float, float]
    """Wilson score interval of `mean`, with the sum of item scores as successes."""
    clustered_se: float | None
    """Standard error of the sample-level mean, samples clustered in items (Miller 2024)."""
    clustered_ci: tuple[float, float] | None
    """mean ± z · clustered_se (normal approximation)."""
    n_samples_total: int
    """Sample slots counted: items × samples per item."""
    ok: int
    """Samples scored from a real completion."""
    missing: int
    """Samples with no completion (written as missing, or absent from the log); scored 0."""
    harness_error: int
    """Samples whose scorer failed; scored 0."""
    finish_reasons: dict[str, int] = {}
    """Completions by the server's finish_reason (`stop`, `length`, …; `unknown` when the
    server gave none); missing samples have no completion and are not counted."""
    length_share: float | None = None
    """Share of the completions that hit max_tokens (finish_reason `length`); truncation is
    the usual hidden confound of a Δ. None when the arm has no completion."""


class TagDelta(_Part):
    """The paired comparison restricted to the items carrying one tag."""

    tag: str
    """The tag."""
    n_items: int
    """Items with this tag."""
    pre_mean: float
    """Mean item score before."""
    post_mean: float
    """Mean item score after."""
    delta: float
    """post_mean − pre_mean."""
    delta_ci: tuple[float, float]
    """Paired bootstrap percentile interval of delta (same confidence and seed)."""
    p_two_sided: float
    """Two-sided paired permutation p-value on this tag's items."""


class PassKBand(_Part):
    """Unbiased pass@k (Chen et al. 2021) for k = 1..n with bootstrap percentile bands."""

    value: list[float]
    """Mean pass@k over items, for each k."""
    low: list[float]
    """Lower band edge for each k."""
    high: list[float]
    """Upper band edge for each k."""


class PassKCurves(_Part):
    """pass@k curves of both arms and of their difference, from the same item resamples."""

    k: list[int]
    """The k values: 1..samples per item."""
    correct_threshold: float
    """A sample counts as correct when its score is ≥ this."""
    pre: PassKBand
    """Before."""
    post: PassKBand
    """After."""
    delta: PassKBand
    """After − before (bands from paired resamples)."""


class DeltaSettings(_Part):
    """The settings the report was computed with."""

    confidence: float
    """Confidence level of every interval."""
    n_resamples: int
    """Bootstrap resamples (Δ CI, per-tag CIs, pass@k bands)."""
    permutation_resamples: int
    """Monte Carlo resamples, used only when the exact permutation test is infeasible."""
    seed: int
    """Seed of every resampling step."""
    mde_power: float
    """Power at which the MDE is stated."""
    items_restricted: bool
    """True when the comparison was restricted to a given subset of the logs' items."""
    scorer: str | None = None
    """The scorer whose output was compared; None: each item's own scorer."""


Cause = Literal["floor", "infra", "length", "format", "drift"]
"""Why an item got worse or still fails (`report/diagnosis.py` states each rule)."""

CAUSES: tuple[Cause, ...] = ("floor", "infra", "length", "format", "drift")
"""The causes in the order they are checked: the first that fits is the item's."""


class DiagnosedItem(_Part):
    """One item that got worse, or that the challenger still fails."""

    item_id: str
    """The suite item's id."""
    tags: list[str]
    """Its tags."""
    cause: Cause
    """The first cause that fits, in `CAUSES` order."""
    worse: bool
    """The challenger's item score is below the champion's."""
    pre_score: float
    """The champion's item score (mean over samples; missing and errors count 0)."""
    post_score: float
    """The challenger's item score."""
    reason: str
    """The figures behind the cause, e.g. `2 of 4 samples hit max_tokens 8`."""


class DiagnosisExample(_Part):
    """An item shown for a cause: what was asked, what was expected, what the challenger said.
    Texts are cut at `diagnosis.EXCERPT_CHARS`; the answer is model output, plain text here and
    escaped where rendered."""

    item_id: str
    """The suite item's id."""
    prompt: str
    """The prompt (empty when the suite is not available)."""
    reference: str
    """The reference answer (empty when the suite is not available)."""
    answer: str
    """The challenger's answer that shows the cause (a truncated one for `length`, one that
    holds the reference for `format`, the error for `infra`)."""
    reason: str
    """The item's reason, as in `DiagnosedItem.reason`."""


class CauseCount(_Part):
    """One cause: how many items it explains, what to do about it, a few of its items."""

    cause: Cause
    """The cause."""
    items: int
    """Items given this cause."""
    worse: int
    """Of them, items whose score fell (the rest still fail without having fallen)."""
    suggestion: str
    """One line with the figures and what to do (empty when no item has this cause)."""
    examples: list[DiagnosisExample] = []
    """The first few items of this cause, in suite order."""


class TagCauses(_Part):
    """The causes counted on the items carrying one tag."""

    tag: str
    """The tag."""
    counts: dict[str, int]
    """Items per cause (every cause, zeros included, in `CAUSES` order)."""


class LenientRescore(_Part):
    """How often the scorer itself is the problem: the challenger's failing answers (on the
    diagnosed items) re-read leniently (`report/lenient.py`)."""

    checked: int
    """Failing answers re-read (their scorer has a lenient reading and the suite is here)."""
    holds_reference: int
    """Of them, answers that hold the reference value the scorer rejected."""
    not_checked: int
    """Failing answers not re-read: their scorer has no lenient reading (tool calls, tests,
    agents, judges), the item gives no reference value, or the suite is not available."""
    not_checked_items: int
    """`drift` items with a failing answer that was not re-read: `format` was not ruled out."""
    note: str | None = None
    """Why nothing could be re-read (the suite is missing or has changed); None when it
    could."""

    @property
    def share(self) -> float | None:
        """holds_reference / checked; None when nothing was checked."""
        return self.holds_reference / self.checked if self.checked else None


class Diagnosis(_Part):
    """Why items got worse or still fail: one cause per item, counted per cause and per tag."""

    threshold: float
    """An item is right when its score is ≥ this (the flips' threshold)."""
    sample_threshold: float
    """A sample passes when its score is ≥ this (the pass@k threshold)."""
    max_tokens: int
    """The completion length limit both arms were sampled with."""
    n_items: int
    """Items compared."""
    worse: int
    """Items whose challenger score is below the champion's."""
    still_failing: int
    """Items the challenger gets wrong (score below `threshold`)."""
    causes: list[CauseCount]
    """One entry per cause, in `CAUSES` order."""
    per_tag: list[TagCauses]
    """Causes per tag, sorted by tag."""
    rescore: LenientRescore
    """The lenient re-scoring of the failing answers."""
    items: list[DiagnosedItem]
    """Every diagnosed item, in suite order."""

    @property
    def diagnosed(self) -> int:
        """Items diagnosed: those that got worse or still fail."""
        return len(self.items)

    def count(self, cause: str) -> int:
        """Items given `cause`."""
        return next((c.items for c in self.causes if c.cause == cause), 0)


class DeltaReport(Record):
    """The paired comparison of two sample logs on the same items (pre vs post)."""

    KIND = "delta"
    VERSION = 2

    suite_revision: str
    """sha256 of the suite both logs were evaluated on (refused if they differ)."""
    slice: str | None
    """Slice named in the logs' summaries (None = whole suite)."""
    n_items: int
    """Items compared."""
    n_samples: int
    """Samples per item (the sampling budget, equal in both logs)."""
    temperature: float
    """Sampling temperature of both logs."""
    pre: ArmSummary
    """The arm before training."""
    post: ArmSummary
    """The arm after training."""
    delta: float
    """Mean over items of (post item score − pre item score)."""
    delta_ci: tuple[float, float]
    """Paired bootstrap percentile interval of delta, items resampled (Koehn 2004)."""
    p_two_sided: float
    """Paired sign-flip permutation test, two-sided."""
    p_greater: float
    """Paired permutation test, one-sided: evidence that post > pre."""
    permutation_method: str
    """How the permutation null was obtained: enumeration, lattice (both exact) or
    monte_carlo."""
    sign_wins: int
    """Items whose score rose."""
    sign_losses: int
    """Items whose score fell."""
    sign_p_two_sided: float
    """Exact binomial sign test on the items that changed, two-sided."""
    sign_p_greater: float
    """Exact sign test, one-sided (post better)."""
    d_z: float | None
    """Cohen's d_z = mean / sd of item differences (None when undefined)."""
    sd_diff: float | None
    """Sample standard deviation of item differences (None with fewer than 2 items)."""
    mde: float | None
    """Minimum detectable effect for this many items: two-sided α = 1 − confidence at
    `settings.mde_power`, from sd_diff (Miller 2024). None when sd_diff is undefined."""
    flips: FlipCounts
    """Item flips between the arms ("right" = item score ≥ `flips.threshold`)."""
    per_tag: list[TagDelta]
    """The comparison per item tag, sorted by tag."""
    passk: PassKCurves
    """pass@k curves with bands."""
    settings: DeltaSettings
    """Settings used."""
    diagnosis: Diagnosis | None = None
    """Why items got worse or still fail (version 2); None when not computed (then the field
    is not written and the record is version 1)."""

    def to_json(self) -> dict[str, Any]:
        out = super().to_json()
        if self.diagnosis is None:  # version 1: readers that predate the diagnosis read it
            del out["diagnosis"]
            out["schema"] = "tuneloop.delta/1"
        return out
