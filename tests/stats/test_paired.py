"""Exact sign test against scipy's binomtest; Cohen's d_z; flip counts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binomtest

from tuneloop.stats import cohens_dz, flip_counts, sign_test


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_sign_test_matches_binomtest(alternative: str) -> None:
    for wins in range(0, 25, 3):
        for losses in range(0, 25, 4):
            if wins + losses == 0:
                continue
            ref = binomtest(wins, wins + losses, 0.5, alternative=alternative).pvalue
            assert sign_test(wins, losses, alternative) == pytest.approx(ref, abs=1e-15)


def test_sign_test_known_values_and_symmetry() -> None:
    assert sign_test(10, 0) == pytest.approx(2 / 1024)
    assert sign_test(10, 0, "greater") == pytest.approx(1 / 1024)
    assert sign_test(0, 0) == 1.0
    assert sign_test(7, 3, "greater") == pytest.approx(sign_test(3, 7, "less"))
    with pytest.raises(ValueError):
        sign_test(1, 2, "bigger")


def test_cohens_dz() -> None:
    d = np.array([0.1, 0.3, -0.2, 0.5, 0.0])
    assert cohens_dz(d) == pytest.approx(d.mean() / d.std(ddof=1), rel=1e-15)
    assert cohens_dz(-d) == pytest.approx(-cohens_dz(d))
    assert math.isnan(cohens_dz([0.5]))
    assert cohens_dz([0.0, 0.0]) == 0.0
    assert cohens_dz([0.2, 0.2]) == math.inf


def test_flip_counts() -> None:
    pre = [0.0, 1.0, 0.25, 0.75, 0.5, 0.0]
    post = [1.0, 0.0, 0.5, 0.75, 0.25, 0.0]
    f = flip_counts(pre, post)
    assert (f.wrong_to_right, f.right_to_wrong) == (2, 2)  # items 0, 2 up; 1, 4 down
    assert (f.both_right, f.both_wrong) == (1, 1)
    assert (f.improved, f.worsened, f.unchanged) == (2, 2, 2)
    with pytest.raises(ValueError):
        flip_counts([0.0], [0.0, 1.0])
