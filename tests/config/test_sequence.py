"""`gate.sequence` (the flywheel's error budget) at load: the shorthand, and every error
naming its key."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.loop import fakeloop
from tuneloop.config import load_config
from tuneloop.errors import InputError


def load(tmp_path: Path, sequence: object, **gate: object):  # type: ignore[no-untyped-def]
    return load_config(fakeloop.write_config(tmp_path, gate={"sequence": sequence, **gate}))


def load_error(tmp_path: Path, sequence: object, **gate: object) -> str:
    with pytest.raises(InputError) as err:
        load(tmp_path, sequence, **gate)
    return str(err.value)


def test_the_string_shorthand_is_the_rule_with_its_defaults(tmp_path: Path) -> None:
    spending = load(tmp_path, "alpha_spending").gate.sequence
    assert spending is not None and (spending.rule, spending.series) == ("alpha_spending", "basel")
    lord = load(tmp_path, "lord").gate.sequence
    assert lord is not None and lord.rule == "lord" and lord.w0 is None
    assert load(tmp_path, None).gate.sequence is None  # the default: no rule


def test_a_bad_key_or_value_names_its_key(tmp_path: Path) -> None:
    message = load_error(tmp_path, {"rule": "alpha_spending", "horizn": 3})
    assert "gate.sequence.horizn (line" in message and "did you mean 'horizon'?" in message
    message = load_error(tmp_path, "bonferroni")
    assert "gate.sequence.rule" in message and "'alpha_spending' or 'lord'" in message
    message = load_error(tmp_path, {"rule": "alpha_spending", "series": "uniform"})
    assert "gate.sequence (line" in message and "horizon: series 'uniform' splits" in message
    message = load_error(tmp_path, {"rule": "lord", "series": "geometric"})
    assert "series: not a setting of rule 'lord'" in message
    message = load_error(tmp_path, {"rule": "alpha_spending", "ratio": 0.3})
    assert "ratio: only the 'geometric' series has one" in message
    message = load_error(tmp_path, {"rule": "lord", "w0": 0.04}, alpha=0.01)
    assert "gate.sequence.w0 (0.04)" in message and "at most gate.alpha (0.01)" in message
