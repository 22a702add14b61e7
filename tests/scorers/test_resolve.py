from __future__ import annotations

from typing import Any

import pytest

from tuneloop.errors import InputError
from tuneloop.plugins import Score
from tuneloop.registry import scorers
from tuneloop.scorers.base import runs_inline
from tuneloop.scorers.resolve import ScorerResolver, scorer_name


def _const(**kw: Any) -> Any:
    def score(item: dict[str, Any], completion: str) -> Score:
        return Score(1.0, {"kw": kw})

    return score


def test_precedence_is_override_then_item_then_default() -> None:
    assert scorer_name({"scorer": "exact"}, "numeric") == "exact"
    assert scorer_name({}, "numeric") == "numeric"
    assert scorer_name({"scorer": "exact"}, "numeric", override="json") == "json"


@pytest.mark.parametrize(
    ("name", "inline"),
    [
        ("numeric", True),
        ("exact", True),
        ("regex", True),
        ("choice", True),
        ("json", True),
        ("python_tests", False),
    ],
)
def test_inline_is_a_property_of_the_registration(name: str, inline: bool) -> None:
    assert runs_inline(scorers.get(name)) is inline
    assert ScorerResolver("numeric").resolve({"scorer": name}).inline is inline


def test_a_factory_registered_without_the_property_is_not_inline() -> None:
    assert not ScorerResolver("x", get=lambda name: _const).resolve({}).inline


def test_each_name_and_arguments_pair_is_built_once() -> None:
    asked: list[str] = []

    def get(name: str) -> Any:
        asked.append(name)
        return _const

    resolver = ScorerResolver("a", get=get)
    first = resolver.resolve({})
    assert resolver.resolve({"scorer": "a"}) is first
    with_args = resolver.resolve({}, {"k": 1})
    assert with_args is not first
    assert with_args.fn({}, "").detail == {"kw": {"k": 1}}
    assert resolver.resolve({"scorer": "b"}).name == "b"
    assert asked == ["a", "a", "b"]


def test_an_unknown_scorer_names_the_known_ones() -> None:
    with pytest.raises(InputError, match="unknown scorer 'numerc'.*did you mean 'numeric'"):
        ScorerResolver("numerc").resolve({})
