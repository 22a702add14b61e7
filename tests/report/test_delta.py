"""compute_delta: the numbers, the refusals, missing samples, tags and pass@k."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tuneloop import stats
from tuneloop.config import ReportConfig
from tuneloop.errors import InputError
from tuneloop.report import compute_delta
from tuneloop.samplelog import load_sample_log

Make = Callable[..., Path]


def _scores(
    seed: int, items: int = 40, n: int = 4, shift: float = 0.0
) -> dict[str, list[float | None]]:
    rng = np.random.default_rng(seed)
    p = np.clip(np.random.default_rng(99).uniform(0.1, 0.9, items) + shift, 0, 1)
    return {f"q{i:03d}": [float(x) for x in rng.binomial(1, p[i], n)] for i in range(items)}


@pytest.fixture
def pair(make_log: Make) -> tuple[Path, Path]:
    tags = {
        f"q{i:03d}": ["even" if i % 2 == 0 else "odd"] + (["x"] if i < 5 else []) for i in range(40)
    }
    pre = make_log(_scores(1), tags=tags, model="base")
    post = make_log(_scores(2, shift=0.2), tags=tags, model="tuned")
    return pre, post


def test_numbers_match_the_stats_library(pair: tuple[Path, Path]) -> None:
    pre_log, post_log = load_sample_log(pair[0]), load_sample_log(pair[1])
    r = compute_delta(pre_log, post_log, settings=ReportConfig(n_resamples=2000, seed=3))
    by_item = lambda rows: stats.mean_item_scores((x.item_id, x.value) for x in rows)  # noqa: E731
    a = np.array(list(by_item(pre_log[1]).values()))
    b = np.array(list(by_item(post_log[1]).values()))
    assert r.n_items == 40 and r.n_samples == 4
    assert r.pre.model == "base" and r.post.model == "tuned"
    assert r.pre.mean == pytest.approx(a.mean()) and r.post.mean == pytest.approx(b.mean())
    assert r.delta == pytest.approx((b - a).mean())
    assert r.delta_ci == pytest.approx(stats.paired_bootstrap_ci(a, b, 0.95, 2000, 3))
    assert r.p_two_sided == pytest.approx(stats.paired_permutation_test(b - a))
    assert r.p_greater == pytest.approx(stats.paired_permutation_test(b - a, "greater"))
    assert r.permutation_method in ("enumeration", "lattice")
    assert r.pre.wilson_ci == pytest.approx(stats.wilson_interval(a.sum(), 40))
    assert r.d_z == pytest.approx(stats.cohens_dz(b - a))
    assert r.mde == pytest.approx(stats.min_detectable_effect(40, float(np.std(b - a, ddof=1))))
    assert r.sign_wins == int(np.sum(b > a)) and r.sign_losses == int(np.sum(b < a))
    assert r.sign_p_greater == pytest.approx(stats.sign_test(r.sign_wins, r.sign_losses, "greater"))
    f = r.flips
    assert f.wrong_to_right + f.right_to_wrong + f.both_right + f.both_wrong == 40
    assert r.pre.clustered_se is not None and r.pre.clustered_se > 0
    # compute_delta has no suite and no diagnosis: written as version 1, as before it existed
    assert r.diagnosis is None and r.to_json()["schema"] == "tuneloop.delta/1"
    assert "diagnosis" not in r.to_json()


def test_swapping_arms_negates_delta_and_mirrors_everything(pair: tuple[Path, Path]) -> None:
    pre, post = load_sample_log(pair[0]), load_sample_log(pair[1])
    r = compute_delta(pre, post, settings=ReportConfig(n_resamples=1001))
    s = compute_delta(post, pre, settings=ReportConfig(n_resamples=1001))
    assert s.delta == pytest.approx(-r.delta)
    assert s.delta_ci == pytest.approx((-r.delta_ci[1], -r.delta_ci[0]))
    assert s.p_two_sided == pytest.approx(r.p_two_sided)
    assert (s.flips.wrong_to_right, s.flips.right_to_wrong) == (
        r.flips.right_to_wrong,
        r.flips.wrong_to_right,
    )
    assert s.d_z == pytest.approx(-r.d_z)  # type: ignore[operator]


def test_per_tag_breakdown(pair: tuple[Path, Path]) -> None:
    r = compute_delta(
        load_sample_log(pair[0]), load_sample_log(pair[1]), settings=ReportConfig(n_resamples=500)
    )
    tags = {t.tag: t for t in r.per_tag}
    assert sorted(tags) == ["even", "odd", "x"]
    assert tags["even"].n_items == tags["odd"].n_items == 20 and tags["x"].n_items == 5
    assert (tags["even"].delta + tags["odd"].delta) / 2 == pytest.approx(r.delta)
    for t in r.per_tag:
        assert t.delta == pytest.approx(t.post_mean - t.pre_mean)
        assert t.delta_ci[0] <= t.delta_ci[1]


def test_missing_and_errors_count_as_zero_and_are_reported(make_log: Make) -> None:
    pre = make_log({"a": [1.0, 1.0], "b": [1.0, 0.0]})
    # a: one missing row, one harness error; b: sample 1 never written at all
    post = make_log({"a": [None, -1.0], "b": [1.0]}, n_samples=2)
    r = compute_delta(
        load_sample_log(pre), load_sample_log(post), settings=ReportConfig(n_resamples=200)
    )
    assert (r.post.ok, r.post.missing, r.post.harness_error) == (1, 2, 1)
    assert r.post.n_samples_total == 4
    assert r.post.mean == pytest.approx(0.25)
    assert r.delta == pytest.approx(0.25 - 0.75)


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"revision": "b" * 64}, "suite revisions"),
        ({"temperature": 0.0}, "sampling.temperature"),
        ({"n_samples": 5}, "sampling.n_samples"),
    ],
)
def test_refuses_incomparable_logs(make_log: Make, kw: dict[str, object], needle: str) -> None:
    scores: dict[str, list[float | None]] = {"a": [1.0], "b": [0.0]}
    pre, post = make_log(scores), make_log(scores, **kw)
    with pytest.raises(InputError, match=needle):
        compute_delta(load_sample_log(pre), load_sample_log(post))


def test_refuses_different_item_sets_and_bad_subsets(make_log: Make) -> None:
    pre = make_log({"a": [1.0], "b": [0.0]})
    post = make_log({"a": [1.0], "c": [0.0]})
    with pytest.raises(InputError, match=r"only in pre .*\['b'\].*only in post .*\['c'\]"):
        compute_delta(load_sample_log(pre), load_sample_log(post))
    same = load_sample_log(pre)
    with pytest.raises(InputError, match="not in the logs"):
        compute_delta(same, same, item_ids=["zzz"])
    with pytest.raises(InputError, match="no items"):
        compute_delta(same, same, item_ids=[])
    r = compute_delta(same, same, item_ids=["b"], settings=ReportConfig(n_resamples=10))
    assert r.n_items == 1 and r.settings.items_restricted
    assert r.d_z is None and r.mde is None and r.delta == 0.0


def test_single_binary_sample_permutation_equals_sign_test(make_log: Make) -> None:
    rng = np.random.default_rng(5)
    pre = make_log({f"i{k}": [float(rng.integers(0, 2))] for k in range(60)})
    post = make_log({f"i{k}": [float(rng.integers(0, 2))] for k in range(60)})
    r = compute_delta(
        load_sample_log(pre), load_sample_log(post), settings=ReportConfig(n_resamples=100)
    )
    assert r.p_two_sided == pytest.approx(r.sign_p_two_sided, rel=1e-9)
    assert r.p_greater == pytest.approx(r.sign_p_greater, rel=1e-9)


def test_passk_curves(pair: tuple[Path, Path]) -> None:
    pre = load_sample_log(pair[0])
    r = compute_delta(pre, load_sample_log(pair[1]), settings=ReportConfig(n_resamples=500))
    pk = r.passk
    assert pk.k == [1, 2, 3, 4]
    assert pk.pre.value[0] == pytest.approx(r.pre.mean)  # binary scores: pass@1 = mean
    correct = [sum(x.value >= 0.5 for x in pre[1] if x.item_id == i) for i in pre[0].item_ids]
    assert pk.pre.value == pytest.approx(stats.pass_at_k_curve(4, correct))
    for band in (pk.pre, pk.post, pk.delta):
        assert all(lo <= v <= hi for lo, v, hi in zip(band.low, band.value, band.high, strict=True))
    assert pk.delta.value == pytest.approx(np.subtract(pk.post.value, pk.pre.value).tolist())
    assert all(a <= b + 1e-12 for a, b in zip(pk.post.value, pk.post.value[1:], strict=False))
