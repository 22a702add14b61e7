from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from tuneloop.config import GateConfig
from tuneloop.errors import InputError
from tuneloop.gate.bar import FIELDS, Bar, load_bar


def test_the_gate_section_carries_the_bar() -> None:
    # One definition: a GateConfig's bar keys are a Bar, defaults and all.
    cfg = GateConfig(margin=0.03, enabled=False)
    assert Bar.of(cfg) == Bar(margin=0.03)
    assert set(Bar().to_dict()) == set(FIELDS) - {"scorer", "cost"} and "enabled" not in FIELDS
    assert Bar(scorer="tool_call_valid").to_dict()["scorer"] == "tool_call_valid"


def test_a_bar_without_a_scorer_keeps_the_hash_it_had_before_scorers() -> None:
    # bars sealed in a ledger before `scorer` existed must still match their seal
    assert Bar().sha256() == "74e521a5f83092eee74c6c3eafafe9a97ec19eb17ba69dbfe1e2dec2e5e40bd6"
    assert Bar(scorer="turns").sha256() != Bar().sha256()


def test_yaml_and_json_bar_files(tmp_path: Path) -> None:
    y = tmp_path / "bar.yaml"
    y.write_text("metric: pass_at_k\nk: 2\nmargin: 0.02\nnon_inferiority_epsilon: 0.05\n")
    j = tmp_path / "bar.json"
    j.write_text('{"alpha": 0.01, "test": "sign"}')
    wanted = Bar(metric="pass_at_k", k=2, margin=0.02, non_inferiority_epsilon=0.05)
    assert Bar.of(load_bar(y)) == wanted and load_bar(y).sequence is None
    assert Bar.of(load_bar(j)) == Bar(alpha=0.01, test="sign")


def test_every_problem_reported_with_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "bar.yaml"
    path.write_text("margn: 0.1\nalpha: 2\ntest: ttest\nk: true\n")
    with pytest.raises(InputError) as err:
        load_bar(path)
    msg = str(err.value)
    assert str(path) in msg and "4 error(s)" in msg
    assert "margn (line 1): unknown key (did you mean 'margin'?)" in msg
    assert "alpha (line 2): must be < 0.5" in msg
    assert "test (line 3): Input should be 'permutation' or 'sign'" in msg
    assert "k (line 4): Input should be a valid integer" in msg  # strict: a boolean is no k


def test_unparsable_file_names_line(tmp_path: Path) -> None:
    path = tmp_path / "bar.yaml"
    path.write_text("metric: mean\nmargin: [0.1\n")
    with pytest.raises(InputError, match=r"bar\.yaml:\d+: invalid YAML"):
        load_bar(path)
    with pytest.raises(InputError, match="not found"):
        load_bar(tmp_path / "nope.yaml")


def test_constructor_validates_and_hash_is_stable() -> None:
    with pytest.raises(ValidationError, match="min_items"):
        Bar(min_items=0)
    with pytest.raises(ValidationError, match="enabled"):
        Bar.model_validate({"enabled": True})
    assert Bar(margin=0).to_dict()["margin"] == 0.0  # an int margin hashes as the float
    assert Bar().sha256() == Bar().sha256() != Bar(margin=0.01).sha256()
