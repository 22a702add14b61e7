from __future__ import annotations

from pathlib import Path

import pytest

from tuneloop.config import GateConfig
from tuneloop.errors import InputError
from tuneloop.gate.bar import FIELDS, Bar, bar_from_mapping, load_bar


def test_defaults_match_gate_config() -> None:
    # The loop unpacks GateConfig into a Bar: the two must not drift apart.
    cfg = GateConfig()
    assert {f: getattr(cfg, f) for f in FIELDS} == Bar().to_dict()


def test_yaml_and_json_bar_files(tmp_path: Path) -> None:
    y = tmp_path / "bar.yaml"
    y.write_text("metric: pass_at_k\nk: 2\nmargin: 0.02\nnon_inferiority_epsilon: 0.05\n")
    j = tmp_path / "bar.json"
    j.write_text('{"alpha": 0.01, "test": "sign"}')
    assert load_bar(y) == Bar(metric="pass_at_k", k=2, margin=0.02, non_inferiority_epsilon=0.05)
    assert load_bar(j) == Bar(alpha=0.01, test="sign")


def test_every_problem_reported_with_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "bar.yaml"
    path.write_text("margn: 0.1\nalpha: 2\ntest: ttest\n")
    with pytest.raises(InputError) as err:
        load_bar(path)
    msg = str(err.value)
    assert str(path) in msg and "3 error(s)" in msg
    assert "did you mean 'margin'" in msg
    assert "alpha: expected" in msg and "test: expected permutation or sign" in msg


def test_unparsable_file_names_line(tmp_path: Path) -> None:
    path = tmp_path / "bar.yaml"
    path.write_text("metric: mean\nmargin: [0.1\n")
    with pytest.raises(InputError, match=r"bar\.yaml:\d+: invalid YAML"):
        load_bar(path)
    with pytest.raises(InputError, match="not found"):
        load_bar(tmp_path / "nope.yaml")


def test_constructor_validates_and_hash_is_stable() -> None:
    with pytest.raises(InputError, match="min_items"):
        Bar(min_items=0)
    with pytest.raises(InputError, match="unknown key"):
        bar_from_mapping({"enabled": True}, "x")
    assert Bar().sha256() == Bar().sha256() != Bar(margin=0.01).sha256()
