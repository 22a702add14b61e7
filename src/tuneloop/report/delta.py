"""Compute the delta report from two sample logs: the pure core of `tuneloop compare`.

`align` checks that the logs are comparable and lays both out as (items × samples) score
matrices; `delta_from_items` computes every statistic; `compute_delta` is the two in a row.
No file I/O here (see `tuneloop.report.build`). Run the tests with
`pytest tests/report/test_delta.py`.

Definitions (also in the docstrings of `DeltaReport`):
- item score = mean of the item's sample values, with missing and harness errors as 0
  (`SampleRow.value`); a sample slot absent from the log counts as missing too;
- an item is "right" when its item score is ≥ 0.5, a sample "correct" when its value is
  ≥ 0.5 (pass@k counts);
- the Wilson interval uses the sum of item scores as fractional successes over n items —
  exact for one binary sample per item, an approximation otherwise (the clustered SE next to
  it is the one that accounts for samples within items).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri

from tuneloop import stats
from tuneloop.config import ReportConfig
from tuneloop.errors import InputError
from tuneloop.report.record import (
    ArmSummary,
    DeltaReport,
    DeltaSettings,
    PassKBand,
    PassKCurves,
    TagDelta,
)
from tuneloop.samplelog import (
    EvalSummary,
    SampleRow,
    check_comparable,
    rows_on_scorer,
    score_grid,
)

Log = tuple[EvalSummary, list[SampleRow]]
CORRECT_THRESHOLD = 0.5
MDE_POWER = 0.8


@dataclass(frozen=True)
class Arm:
    """One arm laid out on the compared items."""

    model: str
    values: np.ndarray
    """(items × samples) sample values; missing/errors/absent are 0."""
    status: dict[str, int]
    """Sample counts by status: ok, missing (incl. absent), harness_error."""
    finish_reasons: dict[str, int]
    """Completions (rows that are not `missing`) by finish_reason."""


@dataclass(frozen=True)
class PairedItems:
    """Both arms on the same items, in the pre log's suite order."""

    item_ids: list[str]
    tags: list[list[str]]
    pre: Arm
    post: Arm
    summary: EvalSummary
    """The pre log's summary (suite revision, slice, sampling)."""

    @property
    def pre_scores(self) -> np.ndarray:
        return self.pre.values.mean(axis=1)

    @property
    def post_scores(self) -> np.ndarray:
        return self.post.values.mean(axis=1)


def check_same_items(pre: EvalSummary, post: EvalSummary, labels: tuple[str, str]) -> None:
    """Refuse logs that evaluated different item sets (a report compares every item)."""
    a, b = labels
    only_pre = sorted(set(pre.item_ids) - set(post.item_ids))
    only_post = sorted(set(post.item_ids) - set(pre.item_ids))
    if only_pre or only_post:
        raise InputError(
            f"{a} and {b} cover different items: {len(only_pre)} only in {a} "
            f"(e.g. {only_pre[:3]}), {len(only_post)} only in {b} (e.g. {only_post[:3]})"
        )


def finish_reasons(rows: Sequence[SampleRow], item_ids: Sequence[str]) -> dict[str, int]:
    """Completions of the given items by finish_reason (missing rows have none)."""
    keep = set(item_ids)
    counts: dict[str, int] = {}
    for row in rows:
        if row.item_id in keep and row.status != "missing":
            reason = row.finish_reason or "unknown"
            counts[reason] = counts.get(reason, 0) + 1
    return dict(sorted(counts.items()))


def _arm(summary: EvalSummary, rows: list[SampleRow], ids: list[str], label: str) -> Arm:
    grid = score_grid(rows, ids, summary.sampling.n_samples, label)
    return Arm(
        model=summary.model,
        values=grid.values,
        status=grid.status,
        finish_reasons=finish_reasons(rows, ids),
    )


def align(
    pre: Log,
    post: Log,
    item_ids: Sequence[str] | None = None,
    labels: tuple[str, str] = ("pre", "post"),
) -> PairedItems:
    """Check comparability and lay both logs out on the same items (pre's order)."""
    check_comparable(pre[0], post[0], labels)
    check_same_items(pre[0], post[0], labels)
    ids = list(pre[0].item_ids)
    if item_ids is not None:
        unknown = sorted(set(item_ids) - set(ids))
        if unknown:
            raise InputError(f"item ids not in the logs: {unknown[:5]} ({len(unknown)} in all)")
        keep = set(item_ids)
        ids = [i for i in ids if i in keep]
    if not ids:
        raise InputError(f"no items to compare between {labels[0]} and {labels[1]}")
    tags: dict[str, set[str]] = {i: set() for i in ids}
    for row in (*pre[1], *post[1]):
        if row.item_id in tags:
            tags[row.item_id].update(row.tags)
    return PairedItems(
        item_ids=ids,
        tags=[sorted(tags[i]) for i in ids],
        pre=_arm(pre[0], pre[1], ids, labels[0]),
        post=_arm(post[0], post[1], ids, labels[1]),
        summary=pre[0],
    )


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def arm_summary(arm: Arm, confidence: float) -> ArmSummary:
    """Mean, Wilson interval and clustered SE of one arm."""
    items, n = arm.values.shape
    scores = arm.values.mean(axis=1)
    mean = float(scores.mean())
    wilson = stats.wilson_interval(min(float(scores.sum()), float(items)), items, confidence)
    se = _finite(stats.clustered_se(arm.values.ravel(), np.repeat(np.arange(items), n)))
    z = float(ndtri(0.5 + confidence / 2))
    completions = sum(arm.finish_reasons.values())
    return ArmSummary(
        model=arm.model,
        mean=mean,
        wilson_ci=wilson,
        clustered_se=se,
        clustered_ci=None if se is None else (mean - z * se, mean + z * se),
        n_samples_total=items * n,
        ok=arm.status["ok"],
        missing=arm.status["missing"],
        harness_error=arm.status["harness_error"],
        finish_reasons=arm.finish_reasons,
        length_share=arm.finish_reasons.get("length", 0) / completions if completions else None,
    )


Settings = ReportConfig
"""Resampling settings of one report: loop.yaml's `report:` section, as is."""


def tag_deltas(paired: PairedItems, s: Settings) -> list[TagDelta]:
    """The paired comparison per tag, sorted by tag."""
    pre, post = paired.pre_scores, paired.post_scores
    out = []
    for tag in sorted({t for ts in paired.tags for t in ts}):
        idx = np.array([tag in ts for ts in paired.tags])
        a, b = pre[idx], post[idx]
        ci = stats.paired_bootstrap_ci(a, b, s.confidence, s.n_resamples, s.seed)
        p = stats.paired_permutation_test(b - a, "two-sided", s.permutation_resamples, s.seed)
        out.append(
            TagDelta(
                tag=tag,
                n_items=int(idx.sum()),
                pre_mean=float(a.mean()),
                post_mean=float(b.mean()),
                delta=float((b - a).mean()),
                delta_ci=ci,
                p_two_sided=p,
            )
        )
    return out


def passk_curves(paired: PairedItems, s: Settings) -> PassKCurves:
    """pass@k for k = 1..n, both arms and Δ, banded by one set of paired item resamples."""
    n = paired.pre.values.shape[1]
    ks = list(range(1, n + 1))
    c_pre = (paired.pre.values >= CORRECT_THRESHOLD).sum(axis=1)
    c_post = (paired.post.values >= CORRECT_THRESHOLD).sum(axis=1)
    # One code per (pre count, post count) pair present; the table row of a code holds pre,
    # post and Δ pass@k for every k, so one set of resamples bands all three coherently.
    pairs, codes = np.unique(np.column_stack([c_pre, c_post]), axis=0, return_inverse=True)
    present = np.unique(pairs)
    per_count = dict(zip(present.tolist(), stats.pass_at_k_matrix(n, present, ks), strict=True))
    pre_rows = np.array([per_count[c] for c in pairs[:, 0].tolist()])
    post_rows = np.array([per_count[c] for c in pairs[:, 1].tolist()])
    table = np.hstack([pre_rows, post_rows, post_rows - pre_rows])
    codes = codes.ravel()
    point = table[codes].mean(axis=0)
    resampled = stats.bootstrap_coded_means(codes, table, s.n_resamples, s.seed)
    low, high = stats.percentile_interval(resampled, s.confidence)

    def band(part: int) -> PassKBand:
        cols = slice(part * n, (part + 1) * n)
        return PassKBand(
            value=point[cols].tolist(), low=low[cols].tolist(), high=high[cols].tolist()
        )

    return PassKCurves(
        k=ks, correct_threshold=CORRECT_THRESHOLD, pre=band(0), post=band(1), delta=band(2)
    )


def delta_from_items(paired: PairedItems, s: Settings, items_restricted: bool) -> DeltaReport:
    """Every statistic of the report from aligned arms."""
    pre, post = paired.pre_scores, paired.post_scores
    d = post - pre
    perm = stats.paired_permutation(d, s.permutation_resamples, s.seed)
    flips = stats.flip_counts(pre, post)
    sd = float(d.std(ddof=1)) if len(d) > 1 else math.nan
    mde = (
        stats.min_detectable_effect(len(d), sd, 1 - s.confidence, MDE_POWER)
        if math.isfinite(sd)
        else math.nan
    )
    sampling = paired.summary.sampling
    return DeltaReport(
        suite_revision=paired.summary.suite_revision,
        slice=paired.summary.slice,
        n_items=len(d),
        n_samples=sampling.n_samples,
        temperature=sampling.temperature,
        pre=arm_summary(paired.pre, s.confidence),
        post=arm_summary(paired.post, s.confidence),
        delta=float(d.mean()),
        delta_ci=stats.paired_bootstrap_ci(pre, post, s.confidence, s.n_resamples, s.seed),
        p_two_sided=perm.p_two_sided,
        p_greater=perm.p_greater,
        permutation_method=perm.method,
        sign_wins=flips.improved,
        sign_losses=flips.worsened,
        sign_p_two_sided=stats.sign_test(flips.improved, flips.worsened, "two-sided"),
        sign_p_greater=stats.sign_test(flips.improved, flips.worsened, "greater"),
        d_z=_finite(stats.cohens_dz(d)),
        sd_diff=_finite(sd),
        mde=_finite(mde),
        flips=flips,
        per_tag=tag_deltas(paired, s),
        passk=passk_curves(paired, s),
        settings=DeltaSettings(
            confidence=s.confidence,
            n_resamples=s.n_resamples,
            permutation_resamples=s.permutation_resamples,
            seed=s.seed,
            mde_power=MDE_POWER,
            items_restricted=items_restricted,
            scorer=s.scorer,
        ),
    )


def compute_delta(
    pre: Log,
    post: Log,
    settings: Settings | None = None,
    *,
    item_ids: Sequence[str] | None = None,
    labels: tuple[str, str] = ("pre", "post"),
) -> DeltaReport:
    """The delta report of two loaded sample logs (pure; raises InputError if incomparable)."""
    settings = settings or Settings()
    if settings.scorer is not None:  # build.compare reads the logs on the scorer already
        pre = (pre[0], rows_on_scorer(pre[1], settings.scorer, labels[0]))
        post = (post[0], rows_on_scorer(post[1], settings.scorer, labels[1]))
    paired = align(pre, post, item_ids, labels)
    return delta_from_items(paired, settings, item_ids is not None)
