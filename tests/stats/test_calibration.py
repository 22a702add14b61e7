"""Isotonic calibration against scikit-learn's IsotonicRegression, and its properties."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tuneloop.stats.calibration import fit_isotonic

sklearn_isotonic = pytest.importorskip("sklearn.isotonic")


def test_a_hand_computed_map() -> None:
    # signal -3, -2, -1, 0 with correctness 0, 1, 0, 1: -2 and -1 violate order and pool to 0.5
    m = fit_isotonic([-3, -2, -1, 0], [0, 1, 0, 1])
    assert m.x == (-3.0, -2.0, -1.0, 0.0) and m.y == (0.0, 0.5, 0.5, 1.0)
    assert m([-5, -2.5, 0.5]).tolist() == [0.0, 0.25, 1.0]  # held, interpolated, held


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 60), st.integers(0, 10_000))
def test_equals_scikit_learn(n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    signal = rng.normal(size=n).round(1)  # ties on purpose
    correct = (rng.random(n) < 1 / (1 + np.exp(-2 * signal))).astype(float)
    ours = fit_isotonic(signal, correct)
    ref = sklearn_isotonic.IsotonicRegression(out_of_bounds="clip").fit(signal, correct)
    probe = np.linspace(signal.min() - 1, signal.max() + 1, 50)
    assert ours(probe) == pytest.approx(ref.predict(probe), abs=1e-12)
    assert ours(signal) == pytest.approx(ref.predict(signal), abs=1e-12)
    assert all(a <= b for a, b in itertools.pairwise(ours.y))


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="one length"):
        fit_isotonic([1, 2], [1])
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        fit_isotonic([1, 2], [1, 2])
    with pytest.raises(ValueError, match="finite"):
        fit_isotonic([np.nan], [1])
