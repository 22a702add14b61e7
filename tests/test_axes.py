"""Round axis ticks: 1-2-5 steps covering the range."""

from __future__ import annotations

import pytest

from tuneloop.axes import nice_ticks


def test_ticks_are_round_and_cover_the_range() -> None:
    assert nice_ticks(0.0, 1.0) == [0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]
    assert nice_ticks(0.0, 1.2e-5, 6) == pytest.approx([0, 2e-6, 4e-6, 6e-6, 8e-6, 1e-5, 1.2e-5])
    assert nice_ticks(3.0, 3.0) == [3.0]
