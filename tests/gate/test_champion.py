"""Champion descriptors: what is accepted, and `workflow` refused in one line."""

from __future__ import annotations

import pytest

from tuneloop.errors import InputError
from tuneloop.gate.champion import describe, parse_descriptor


def test_single_and_cascade_descriptors_are_accepted_and_described() -> None:
    single = parse_descriptor({"path": "m/", "sha256": "ab" * 32}, "here")
    assert single.kind == "single" and describe(single.model_dump()) == "m/ (abababababab)"
    cascade = {"kind": "cascade", "components": [{"role": "draft", "path": "s/"}]}
    assert describe(parse_descriptor(cascade, "here").model_dump()) == "cascade[draft=s/]"


def test_a_workflow_is_refused_as_not_supported_yet() -> None:
    workflow = {"kind": "workflow", "components": [{"role": "planner", "path": "p/"}]}
    with pytest.raises(InputError) as err:
        parse_descriptor(workflow, "champion.json")
    message = str(err.value)
    assert message.count("\n") == 0 and message.startswith("champion.json: ")
    assert "workflow (a fixed multi-step graph) is not supported yet" in message


def test_a_cascade_without_components_and_a_single_without_a_model() -> None:
    with pytest.raises(InputError, match="needs at least one component"):
        parse_descriptor({"kind": "cascade"}, "x")
    with pytest.raises(InputError, match="needs 'path' or 'model'"):
        parse_descriptor({"kind": "single"}, "x")


def test_a_cascade_hand_off_names_a_signal_and_a_threshold_in_its_range() -> None:
    def cascade(signal: object, threshold: object) -> dict[str, object]:
        small = {"role": "tier-1", "path": "s/", "signal": signal, "threshold": threshold}
        small["usd_per_1m"] = 0.2
        big = {"role": "tier-2", "path": "b/", "usd_per_1m": 4.0}
        return {"kind": "cascade", "components": [small, big]}

    assert parse_descriptor(cascade("mean_logprob", -0.5), "x").kind == "cascade"
    assert parse_descriptor(cascade("agreement", 1), "x").kind == "cascade"
    with pytest.raises(InputError, match="threshold 0.5 is outside mean_logprob's range"):
        parse_descriptor(cascade("mean_logprob", 0.5), "x")
    with pytest.raises(InputError, match="threshold -1 is outside min_margin's range"):
        parse_descriptor(cascade("min_margin", -1), "x")
    with pytest.raises(InputError, match="signal: Input should be 'mean_logprob'"):
        parse_descriptor(cascade("entropy", 0), "x")
