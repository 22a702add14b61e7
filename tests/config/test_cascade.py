"""`cascade:` refused at load (its own rules) and at preflight (its ties to `serve`, `gate` and
`eval`), each error naming its key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.loop import fakeloop
from tests.loop.preflight.test_checks import line_of
from tests.modelfiles import write_model_files
from tuneloop.config import load_config
from tuneloop.errors import InputError
from tuneloop.loop.preflight import check_before_compute, preflight

TRAINED = {"name": "small", "model": "trained", "usd_per_1m": 0.2}
TEACHER = {"name": "big", "path": "teacher", "usd_per_1m": 4.0}
ENDPOINT = {"name": "api", "endpoint": "https://api.example/v1", "model": "big-1", "usd_per_1m": 8}


def write(tmp: Path, cascade: dict[str, Any] | None, **sections: Any) -> Path:
    """A fake loop's config (a model folder `teacher/` beside it) with `cascade` and the
    challenger `cascade` unless `sections` says otherwise."""
    write_model_files(tmp / "teacher")
    data = tmp / "train.jsonl"
    data.write_text(json.dumps({"prompt": "1+1=", "answer": "2"}) + "\n")
    sections = {"serve": {"challenger": "cascade"}, "train": {"data": str(data)}} | sections
    if cascade is not None:
        sections["cascade"] = cascade
    return fakeloop.write_config(tmp, **sections)


def load_error(path: Path) -> str:
    with pytest.raises(InputError) as err:
        load_config(path)
    return str(err.value)


def errors(path: Path) -> dict[str, str]:
    return {e.key: e.message for e in preflight(load_config(path)).errors}


def test_a_good_section_loads_and_passes_preflight(tmp_path: Path) -> None:
    path = write(tmp_path, {"tiers": [TRAINED, TEACHER, ENDPOINT], "budget": 1e-6})
    cfg = load_config(path)
    assert cfg.cascade is not None
    assert [t.name for t in cfg.cascade.tiers] == ["small", "big", "api"]
    assert cfg.cascade.tiers[1].path == tmp_path / "teacher"  # against the YAML's folder
    assert (cfg.cascade.objective, cfg.cascade.slice, cfg.cascade.signal) == (
        "max_accuracy_under_cost",
        "dev",
        "mean_logprob",
    )
    assert errors(path) == {}


@pytest.mark.parametrize(
    ("tiers", "words"),
    [
        ([TEACHER, {**TEACHER, "name": "b2"}], "got []"),
        ([TRAINED, {**TRAINED, "name": "s2"}], "got ['small', 's2']"),
    ],
)
def test_exactly_one_tier_is_trained(tmp_path: Path, tiers: list[Any], words: str) -> None:
    message = load_error(write(tmp_path, {"tiers": tiers, "budget": 1.0}))
    assert "cascade (line" in message
    assert "exactly one tier is `model: trained`" in message and words in message


@pytest.mark.parametrize(
    "tier",
    [
        {**ENDPOINT, "name": "both", "path": "teacher"},
        {k: v for k, v in ENDPOINT.items() if k != "model"} | {"name": "both"},
        {"name": "both", "usd_per_1m": 1.0},
        {"name": "both", "model": "base", "path": "teacher", "usd_per_1m": 1.0},
    ],
)
def test_a_tier_with_no_single_source_is_refused_naming_it(
    tmp_path: Path, tier: dict[str, Any]
) -> None:
    message = load_error(write(tmp_path, {"tiers": [TRAINED, tier], "budget": 1.0}))
    assert "cascade.tiers.1 (line" in message and "tier 'both': give one of" in message


def test_max_accuracy_under_cost_needs_a_budget(tmp_path: Path) -> None:
    message = load_error(write(tmp_path, {"tiers": [TRAINED, TEACHER]}))
    assert "cascade (line" in message
    assert "objective max_accuracy_under_cost needs budget" in message
    (tmp_path / "b").mkdir()
    other = {"tiers": [TRAINED, TEACHER], "objective": "min_cost_non_inferior"}
    assert load_config(write(tmp_path / "b", other)).cascade is not None


def test_names_are_distinct_and_safe(tmp_path: Path) -> None:
    twice = {"tiers": [TRAINED, {**TEACHER, "name": "small"}], "budget": 1.0}
    assert "tier names must be distinct" in load_error(write(tmp_path, twice))
    (tmp_path / "b").mkdir()
    climbing = {"tiers": [TRAINED, {**TEACHER, "name": "../x"}], "budget": 1.0}
    assert "cascade.tiers.1.name (line" in load_error(write(tmp_path / "b", climbing))


# ---- preflight: the section against the rest of the config -------------------------------------


def test_a_cascade_challenger_without_a_cascade_section(tmp_path: Path) -> None:
    found = errors(write(tmp_path, None))
    assert "needs a `cascade:` section" in found["serve.challenger"]


def test_a_cascade_section_with_another_challenger(tmp_path: Path) -> None:
    path = write(tmp_path, {"tiers": [TRAINED, TEACHER], "budget": 1.0}, serve={})
    assert "serve.challenger is not `cascade`: it would be ignored" in errors(path)["cascade"]


def test_composing_on_the_gate_slice_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, {"tiers": [TRAINED, TEACHER], "budget": 1.0, "slice": "gate"})
    assert "'gate' is the gate slice" in errors(path)["cascade.slice"]


def test_agreement_needs_two_samples(tmp_path: Path) -> None:
    section = {"tiers": [TRAINED, TEACHER], "budget": 1.0, "signal": "agreement"}
    found = errors(write(tmp_path, section))
    assert "agreement needs eval.n_samples of at least 2" in found["cascade.signal"]
    (tmp_path / "b").mkdir()
    assert errors(write(tmp_path / "b", section, eval={"n_samples": 2})) == {}


def test_a_tier_path_that_is_no_model_folder(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    section = {"tiers": [TRAINED, TEACHER, {**TEACHER, "name": "e", "path": "empty"}]}
    found = errors(write(tmp_path, section | {"budget": 1.0}))
    assert found == {"cascade.tiers.2.path": f"{tmp_path / 'empty'}: not a model folder"}


def test_every_cascade_error_at_once_with_its_line(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    section = {
        "tiers": [TRAINED, {**TEACHER, "path": "empty"}],
        "budget": 1.0,
        "slice": "gate",
        "signal": "agreement",
    }
    path = write(tmp_path, section)
    with pytest.raises(InputError) as err:
        check_before_compute(load_config(path), path)
    message, text = str(err.value), path.read_text()
    assert "3 error(s)" in message
    for key, start in [
        ("cascade.slice", "  slice: gate"),
        ("cascade.signal", "  signal: agreement"),
        ("cascade.tiers.1.path", "    path: empty"),
    ]:
        assert f"{key} (line {line_of(text, start)}): " in message, key
