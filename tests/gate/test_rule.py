from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tuneloop.gate.bar import Bar
from tuneloop.gate.rule import decide, item_scores
from tuneloop.stats import pass_at_k

RNG = np.random.default_rng(0)
CHAMP = (RNG.random((80, 4)) < 0.4).astype(float).mean(axis=1)
BETTER = np.minimum(CHAMP + (RNG.random(80) < 0.3) * 0.5, 1.0)


def names(decision) -> set[str]:  # type: ignore[no-untyped-def]
    return {c.name for c in decision.conditions if not c.passed}


def test_identical_arms_are_rejected_with_p_one() -> None:
    d = decide(CHAMP, CHAMP, bar=Bar())
    assert not d.promote
    assert names(d) == {"significance"}
    assert d.stats["p_value"] == 1.0 and d.stats["delta"] == 0.0
    assert any("p = 1" in r for r in d.reasons)


def test_clear_improvement_is_promoted_and_every_condition_listed() -> None:
    d = decide(CHAMP, BETTER, bar=Bar(margin=0.02))
    assert d.promote and d.reasons == []
    assert [c.name for c in d.conditions] == [
        "min_items",
        "missing_champion",
        "missing_challenger",
        "significance",
        "margin",
    ]
    assert d.stats["delta_lower_bound"] > 0
    assert d.stats["wins"] > 0 and d.stats["losses"] == 0


@pytest.mark.parametrize(
    ("bar", "missing", "failed"),
    [
        (Bar(min_items=81), (0.0, 0.0), {"min_items"}),
        (Bar(), (0.0, 0.03), {"missing_challenger"}),
        (Bar(), (0.021, 0.0), {"missing_champion"}),
        (Bar(margin=0.5), (0.0, 0.0), {"margin"}),
    ],
)
def test_each_condition_fails_on_its_own(
    bar: Bar, missing: tuple[float, float], failed: set[str]
) -> None:
    d = decide(CHAMP, BETTER, bar=bar, missing=missing)
    assert not d.promote and names(d) == failed and len(d.reasons) == 1


def test_regression_is_never_promoted_with_either_test() -> None:
    for test in ("permutation", "sign"):
        d = decide(BETTER, CHAMP, bar=Bar(test=test))
        assert not d.promote and "significance" in names(d)


def test_non_inferiority_blocks_a_regressed_tag() -> None:
    n = 120
    a = np.zeros(n)
    b = np.zeros(n)
    b[:40] = 1.0  # tag "add" (first 60 items) improves on two thirds of its items ...
    a[60:][::5] = 1.0  # ... tag "sub" regresses on a fifth of its items
    tags = [["add"]] * 60 + [["sub"]] * 60
    d = decide(a, b, bar=Bar(non_inferiority_epsilon=0.05), tags=tags)
    assert not d.promote
    assert names(d) == {"non_inferiority:sub"}
    sub = next(c for c in d.conditions if c.name == "non_inferiority:sub")
    assert sub.values["lower_bound"] <= -0.05
    d_ok = decide(a, b, bar=Bar(non_inferiority_epsilon=0.5), tags=tags)
    assert "non_inferiority:sub" not in names(d_ok)


def test_single_item_tag_fails_closed_and_missing_tags_fail() -> None:
    tags = [["common"]] * 79 + [["rare"]]
    d = decide(CHAMP, BETTER, bar=Bar(non_inferiority_epsilon=0.1), tags=tags)
    assert names(d) == {"non_inferiority:rare"}
    d2 = decide(CHAMP, BETTER, bar=Bar(non_inferiority_epsilon=0.1))
    assert names(d2) == {"non_inferiority"}


def test_item_scores_mean_and_unbiased_pass_at_k() -> None:
    samples = np.array([[1, 0, 0, 1], [0, 0, 0, 0], [1, 1, 1, 1], [0.5, 1, 0, 0]], dtype=float)
    assert item_scores(samples, "mean").tolist() == [0.5, 0.0, 1.0, 0.375]
    got = item_scores(samples, "pass_at_k", k=2)
    # partial credit (0.5) is not a pass: row 4 has one correct sample
    assert got.tolist() == [pass_at_k(4, 2, 2), 0.0, 1.0, pass_at_k(4, 1, 2)]
    with pytest.raises(ValueError, match="at least 5 samples"):
        item_scores(samples, "pass_at_k", k=5)


def test_empty_slice_is_rejected() -> None:
    d = decide([], [], bar=Bar())
    assert not d.promote and {"min_items", "significance"} <= names(d)


item_lists = st.lists(st.integers(0, 4), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(item_lists, item_lists, st.sampled_from(["permutation", "sign"]))
def test_properties(pre: list[int], post: list[int], test: str) -> None:
    n = min(len(pre), len(post))
    a = np.array(pre[:n]) / 4
    b = np.array(post[:n]) / 4
    bar = Bar(test=test, min_items=1)
    d = decide(a, b, bar=bar, bound=False)
    # promote iff every condition passed; reasons are exactly the failed conditions
    assert d.promote == all(c.passed for c in d.conditions)
    assert len(d.reasons) == sum(not c.passed for c in d.conditions)
    # the same model never beats itself, and two models never beat each other
    assert not decide(a, a, bar=bar, bound=False).promote
    assert not (d.promote and decide(b, a, bar=bar, bound=False).promote)


def test_non_inferiority_controls_family_wise_error_with_holm(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from tuneloop.gate import rule

    # two tags whose raw p-values (0.03, 0.04) each pass alpha = 0.05 alone; Holm's smallest
    # adjusted p is 2 × 0.03 = 0.06, so neither tag may be declared non-inferior
    raw = iter([0.03, 0.04])
    monkeypatch.setattr(rule, "_ni_p_value", lambda *a, **k: next(raw))
    a = np.zeros(40)
    b = np.where(np.arange(40) % 2 == 0, 1.0, 0.0)
    tags = [["x"] if i < 20 else ["y"] for i in range(40)]
    d = rule.decide(a, b, bar=Bar(non_inferiority_epsilon=0.1), tags=tags)
    ni = {c.name: c for c in d.conditions if c.name.startswith("non_inferiority")}
    assert [c.passed for c in ni.values()] == [False, False]
    assert ni["non_inferiority:x"].values["p_holm"] == pytest.approx(0.06)
    assert ni["non_inferiority:y"].values["p_holm"] == pytest.approx(0.06)
    assert "Holm-adjusted over 2 tags" in ni["non_inferiority:x"].detail
    assert not d.promote


def test_non_inferiority_p_value_agrees_with_the_lower_bound() -> None:
    from tuneloop.gate import rule

    rng = np.random.default_rng(3)
    d = rng.choice([-1.0, 0.0, 1.0], size=80, p=[0.2, 0.5, 0.3])
    for eps in (0.01, 0.05, 0.1, 0.2):
        p = rule._ni_p_value(d, eps, seed=0, n_resamples=4000)
        low = rule._lower_bound(np.zeros_like(d), d, 0.05, 0, 4000)
        # the bound clears -eps exactly when the bootstrap p-value is below alpha (± one step)
        if abs(low + eps) > 0.02:
            assert (p < 0.05) == (low > -eps)
