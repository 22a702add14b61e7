"""`compose --calibrate`: each handing-off tier's signal mapped to P(correct) by an isotonic fit
on the composed (validation) items only, the thresholds then probabilities, the maps carried
in the descriptor the served cascade applies."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.cascade.test_compose import write_tier
from tuneloop.cascade import Tier, compose_logs
from tuneloop.cascade_spec import read_cascade
from tuneloop.stats.calibration import fit_isotonic

IDS = [f"i{k:02d}" for k in range(12)]
VALIDATION = IDS[:8]
SMALL_CONF = [-0.1, -0.2, -0.4, -0.6, -0.9, -1.2, -1.5, -2.0, -0.05, -0.3, -2.5, -3.0]
SMALL_SCORE = [1, 1, 1, 0, 1, 0, 0, 0, 1, 0, 1, 1]


def tiers(tmp: Path, small_scores: list[float]) -> list[Tier]:
    small = write_tier(tmp / "small", "small", small_scores, SMALL_CONF, items=IDS)
    big = write_tier(tmp / "big", "big", [1.0] * len(IDS), None, items=IDS)
    return [Tier("small", small, 1.0), Tier("big", big, 10.0)]


def test_the_map_is_fitted_on_the_composed_items_and_carried_to_the_descriptor(
    tmp_path: Path,
) -> None:
    record = compose_logs(
        tiers(tmp_path, SMALL_SCORE),
        objective="max_accuracy_under_cost",
        budget=6e-5,
        item_ids=VALIDATION,
        calibrate=True,
    )
    expected = fit_isotonic(SMALL_CONF[:8], SMALL_SCORE[:8])
    assert record.calibration == [{"x": list(expected.x), "y": list(expected.y)}, None]
    assert record.to_json()["schema"] == "tuneloop.composition/2"
    assert all(0.0 <= t <= 1.0 for p in record.frontier for t in p.thresholds if np.isfinite(t))
    assert record.descriptor is not None
    small = record.descriptor["components"][0]
    assert small["calibration"] == {"x": list(expected.x), "y": list(expected.y)}
    spec = read_cascade(record.descriptor, "composition.json")  # servable: a probability
    assert 0.0 <= (spec.tiers[0].threshold or -1) <= 1.0
    # the served map gives what the composition used
    for raw in SMALL_CONF[:8]:
        assert spec.tiers[0].calibration is not None
        assert spec.tiers[0].calibration.apply(raw) == pytest.approx(float(expected([raw])[0]))


def test_items_outside_the_validation_part_do_not_move_the_map_or_the_choice(
    tmp_path: Path,
) -> None:
    flipped = SMALL_SCORE[:8] + [1 - s for s in SMALL_SCORE[8:]]
    kwargs = dict(objective="max_accuracy_under_cost", budget=6e-5, item_ids=VALIDATION)
    a = compose_logs(tiers(tmp_path / "a", SMALL_SCORE), calibrate=True, **kwargs)  # type: ignore[arg-type]
    b = compose_logs(tiers(tmp_path / "b", flipped), calibrate=True, **kwargs)  # type: ignore[arg-type]
    assert a.calibration == b.calibration
    assert a.chosen == b.chosen


def test_without_calibrate_the_record_is_version_one(tmp_path: Path) -> None:
    record = compose_logs(tiers(tmp_path, SMALL_SCORE), item_ids=VALIDATION)
    out = record.to_json()
    assert out["schema"] == "tuneloop.composition/1" and "calibration" not in out
    assert record.descriptor is None or "calibration" not in record.descriptor["components"][0]
