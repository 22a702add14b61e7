"""A cascade descriptor read for serving (`tuneloop.cascade_spec`): its calibration maps equal
the numpy reference, every malformed tier or router is refused naming it, local paths resolve
against the descriptor's folder, and `kind: workflow` is refused where descriptors are read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.modelfiles import write_model_files
from tuneloop.cascade_spec import Calibration, is_cascade_file, load_cascade, read_cascade
from tuneloop.errors import InputError
from tuneloop.gate.champion import parse_descriptor
from tuneloop.stats.calibration import IsotonicMap, fit_isotonic

SMALL = {
    "role": "tier-1",
    "name": "small",
    "path": "small",
    "usd_per_1m": 0.2,
    "signal": "mean_logprob",
    "threshold": -0.35,
}
BIG = {
    "role": "tier-2",
    "name": "big",
    "endpoint": "https://api.example/v1",
    "model": "big-1",
    "api_key_env": "BIG_KEY",
    "usd_per_1m": 8.0,
}
MAP = {"x": [-2.0, -1.0, 0.0], "y": [0.1, 0.5, 0.9]}


def cascade(*tiers: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"kind": "cascade", "name": "c", "components": list(tiers), **extra}


def refusal(descriptor: dict[str, Any]) -> str:
    with pytest.raises(InputError) as err:
        read_cascade(descriptor, "c.json")
    return str(err.value)


# ---- the calibration map: what IsotonicMap (np.interp) computes -------------------------------

_coord = st.floats(-100, 100, allow_nan=False, allow_subnormal=False)
_maps = st.integers(1, 12).flatmap(
    lambda n: st.tuples(
        st.lists(_coord, min_size=n, max_size=n, unique=True).map(sorted),
        st.lists(st.floats(0, 1), min_size=n, max_size=n).map(sorted),
    )
)


@settings(max_examples=300, deadline=None)
@given(_maps, st.lists(st.floats(-1e4, 1e4, allow_nan=False), max_size=20))
def test_apply_equals_the_numpy_reference(
    xy: tuple[list[float], list[float]], probes: list[float]
) -> None:
    x, y = xy
    cal, ref = Calibration(x=x, y=y), IsotonicMap(tuple(x), tuple(y))
    beyond = [x[0] - 1, x[-1] + 1, -1e6, 1e6]  # held at the end values
    for v in [*probes, *beyond]:
        assert cal.apply(v) == pytest.approx(float(ref(v)), abs=1e-12), v
    for v in x:  # exactly on a fitted point: that point's value, not an approximation
        assert cal.apply(v) == float(ref(v)) == y[x.index(v)]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 60), st.integers(0, 10_000), st.booleans())
def test_a_fitted_map_round_trips_through_a_descriptor(n: int, seed: int, scores: bool) -> None:
    rng = np.random.default_rng(seed)
    signal = -rng.exponential(size=n).round(1)  # mean log-probabilities, with ties
    correct = rng.random(n) if scores else (rng.random(n) < np.exp(signal)).astype(float)
    fitted = fit_isotonic(signal, correct)
    mapping = json.loads(json.dumps({"x": list(fitted.x), "y": list(fitted.y)}))
    spec = read_cascade(cascade(SMALL | {"calibration": mapping, "threshold": 0.5}, BIG), "c")
    cal = spec.tiers[0].calibration
    assert cal == Calibration(x=list(fitted.x), y=list(fitted.y))
    probes = [*np.linspace(signal.min() - 1, signal.max() + 1, 41), *fitted.x]
    assert [cal.apply(float(v)) for v in probes] == pytest.approx(
        fitted(probes).tolist(), abs=1e-12
    )


@pytest.mark.parametrize(
    ("mapping", "words"),
    [
        ({"x": [0.0, -1.0], "y": [0.2, 0.8]}, "x must be sorted and distinct"),
        ({"x": [-1.0, -1.0], "y": [0.2, 0.8]}, "x must be sorted and distinct"),
        ({"x": [-1.0, 0.0], "y": [0.8, 0.2]}, "y must be non-decreasing"),
        ({"x": [-1.0, 0.0], "y": [0.2, 1.5]}, "y must be probabilities in [0, 1]"),
        ({"x": [-1.0, 0.0], "y": [-0.1, 0.5]}, "y must be probabilities in [0, 1]"),
        ({"x": [-1.0, 0.0], "y": [0.5]}, "x and y must have one length"),
        ({"x": [], "y": []}, "calibration.x"),
    ],
)
def test_a_bad_map_is_refused_naming_the_tier(mapping: dict[str, Any], words: str) -> None:
    message = refusal(cascade(SMALL | {"calibration": mapping, "threshold": 0.5}, BIG))
    assert message.startswith("c.json: tier 'small': calibration") and words in message


# ---- tiers and their hand-offs -----------------------------------------------------------------


def test_a_threshold_on_a_calibrated_tier_is_a_probability() -> None:
    calibrated = SMALL | {"calibration": MAP}
    spec = read_cascade(cascade(calibrated | {"threshold": 0.6}, BIG), "c.json")
    assert spec.tiers[0].range() == (0.0, 1.0)
    assert spec.tiers[0].calibration is not None and spec.tiers[0].calibration.apply(-0.5) == 0.7
    message = refusal(cascade(calibrated, BIG))  # -0.35: a raw mean_logprob, not P(correct)
    assert "tier 'small': threshold -0.35 is outside calibrated mean_logprob's range [0, 1]" in (
        message
    )
    assert "[0, 1]" in refusal(cascade(calibrated | {"threshold": 1.2}, BIG))
    # the same threshold without a map is outside the raw signal's range
    assert read_cascade(cascade(SMALL, BIG), "c").tiers[0].range() == (-np.inf, 0.0)
    assert "outside mean_logprob's range [-inf, 0]" in refusal(
        cascade(SMALL | {"threshold": 0.6}, BIG)
    )


def test_two_tunable_tiers_and_duplicate_names_are_refused() -> None:
    both = cascade(SMALL | {"tunable": True}, BIG | {"tunable": True})
    assert refusal(both) == "c.json: at most one tier is tunable"
    twice = cascade(SMALL, SMALL | {"role": "tier-2"})
    assert "tier names must be distinct (got ['small', 'small'])" in refusal(twice)
    spec = read_cascade(cascade(SMALL | {"tunable": True}, BIG), "c")
    assert [t.tunable for t in spec.tiers] == [True, False]


def test_a_tier_is_a_folder_or_an_endpoint_with_a_model() -> None:
    assert "tier 'big': give either 'path'" in refusal(cascade(SMALL, BIG | {"path": "b"}))
    no_model = {k: v for k, v in BIG.items() if k != "model"}
    assert "tier 'big': an endpoint tier needs 'model'" in refusal(cascade(SMALL, no_model))
    no_signal = {k: v for k, v in SMALL.items() if k != "signal"}
    assert "tier 'small': every tier but the last needs 'signal'" in refusal(
        cascade(no_signal, BIG)
    )
    assert "at least two tiers" in refusal(cascade(SMALL))
    unnamed = {k: v for k, v in SMALL.items() if k != "name"}
    named_by_role = read_cascade(cascade(unnamed, BIG), "c")
    assert [t.name for t in named_by_role.tiers] == ["tier-1", "big"]


def test_a_rule_router_names_known_tiers_and_a_default() -> None:
    rules = {"kind": "rules", "rules": [{"tier": "small", "max_chars": 40}], "default": "big"}
    no_signal = {k: v for k, v in SMALL.items() if k not in ("signal", "threshold")}
    spec = read_cascade(cascade(no_signal, BIG, routing=rules), "c")  # no hand-off asked for
    assert spec.routing.kind == "rules" and spec.routing.default == "big"
    unknown = rules | {"rules": [{"tier": "medium"}]}
    assert "routing names tier 'medium', not one of ['small', 'big']" in refusal(
        cascade(SMALL, BIG, routing=unknown)
    )
    assert "routing names tier 'huge'" in refusal(
        cascade(SMALL, BIG, routing=rules | {"default": "huge"})
    )
    no_default = {k: v for k, v in rules.items() if k != "default"}
    assert refusal(cascade(SMALL, BIG, routing=no_default)) == (
        "c.json: routing.default: a rule router needs a default tier"
    )
    assert "routing.kind" in refusal(cascade(SMALL, BIG, routing={"kind": "random"}))


def test_the_identity_is_the_canonical_descriptors_hash() -> None:
    one = read_cascade(cascade(SMALL, BIG), "c")
    reordered = dict(reversed(list(cascade(SMALL, BIG).items())))
    assert read_cascade(reordered, "c").descriptor_sha256 == one.descriptor_sha256
    moved = read_cascade(cascade(SMALL | {"threshold": -0.5}, BIG), "c")
    assert moved.descriptor_sha256 != one.descriptor_sha256
    assert one.identity == f"c@sha256:{one.descriptor_sha256}"


# ---- the file: paths, sniffing, other kinds ----------------------------------------------------


def test_a_relative_path_resolves_against_the_descriptors_folder(tmp_path: Path) -> None:
    folder = tmp_path / "cascades"
    folder.mkdir()
    fixed = SMALL | {"name": "fixed", "path": str(tmp_path / "elsewhere")}
    (folder / "c.json").write_text(json.dumps(cascade(SMALL, fixed, BIG)))
    spec = load_cascade(folder / "c.json")
    assert spec.tiers[0].path == str((folder / "small").resolve())
    assert spec.tiers[1].path == str(tmp_path / "elsewhere")  # absolute: kept
    assert spec.tiers[2].path is None and not spec.tiers[2].local
    # read without a base (a descriptor from the ledger), a relative path is left as it is
    assert read_cascade(cascade(SMALL, BIG), "ledger").tiers[0].path == "small"


def test_a_file_that_is_no_descriptor_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(InputError, match="bad.json: cannot read a cascade descriptor"):
        load_cascade(tmp_path / "bad.json")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(InputError, match="list.json: a cascade descriptor is a JSON object"):
        load_cascade(tmp_path / "list.json")


def test_is_cascade_file(tmp_path: Path) -> None:
    model = write_model_files(tmp_path / "model")
    (tmp_path / "c.json").write_text(json.dumps(cascade(SMALL, BIG)))
    (tmp_path / "c.txt").write_text(json.dumps(cascade(SMALL, BIG)))
    (tmp_path / "single.json").write_text(json.dumps({"kind": "single", "path": "m"}))
    (tmp_path / "garbage.json").write_bytes(b"\x00\xffnot json")
    (tmp_path / "list.json").write_text("[]")
    (tmp_path / "dir.json").mkdir()
    assert is_cascade_file(tmp_path / "c.json") and is_cascade_file(str(tmp_path / "c.json"))
    for other in ("c.txt", "single.json", "garbage.json", "list.json", "dir.json", "none.json"):
        assert not is_cascade_file(tmp_path / other), other
    assert not is_cascade_file(model) and not is_cascade_file(model / "config.json")


def test_a_workflow_is_refused_in_one_line() -> None:
    workflow = {"kind": "workflow", "components": [{"role": "planner", "path": "p/"}]}
    with pytest.raises(InputError) as err:
        parse_descriptor(workflow, "champion.json")
    message = str(err.value)
    assert "\n" not in message and message.startswith("champion.json: ")
    assert "workflow" in message and "not supported" in message
    assert refusal(workflow) == "c.json: kind 'workflow' is not a cascade"
