"""The delta report record (`tuneloop.delta/1`): what `compare` writes to delta.json.

Every number is computed from the two sample logs named in it, by `tuneloop.report.delta`.
"""

from __future__ import annotations

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


class DeltaReport(Record):
    """The paired comparison of two sample logs on the same items (pre vs post)."""

    KIND = "delta"
    VERSION = 1

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
