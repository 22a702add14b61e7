import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tuneloop.scorers.judge import Unparsable, parse_grade, parse_verdict


@pytest.mark.parametrize(
    "text, value",
    [
        ("Correct.\nSCORE: 1", 1.0),
        ("score: 0.25", 0.25),
        ("**Score:** 0.5\n\n", 0.5),
        ("SCORE = 0", 0.0),
    ],
)
def test_grade_reads_the_last_line(text, value):
    assert parse_grade(text) == value


@pytest.mark.parametrize(
    "text",
    [
        "",
        "The answer deserves a 1.",  # prose: no hunting for a number
        "SCORE: 1\nI am confident.",  # the verdict must be the last line
        "SCORE: 1.5",  # out of range
        "SCORE: -0.1",
        "SCORE: high",
    ],
)
def test_grade_refuses_anything_else(text):
    with pytest.raises(Unparsable):
        parse_grade(text)


@pytest.mark.parametrize(
    "text, verdict", [("VERDICT: A", "A"), ("x\nverdict: b", "B"), ("VERDICT: Tie", "TIE")]
)
def test_verdicts(text, verdict):
    assert parse_verdict(text) == verdict


@pytest.mark.parametrize("text", ["A is better", "VERDICT: C", "VERDICT: A\nbecause"])
def test_verdict_refuses(text):
    with pytest.raises(Unparsable):
        parse_verdict(text)


@given(st.text(max_size=200))
def test_parsers_never_raise_anything_but_unparsable(text):
    for parse in (parse_grade, parse_verdict):
        with contextlib.suppress(Unparsable):
            parse(text)


@given(
    st.floats(min_value=0, max_value=1, allow_nan=False).map(lambda v: round(v, 4)),
    st.text(alphabet="ab .\n", max_size=50),
)
def test_grade_round_trips(value, prose):
    assert parse_grade(f"{prose}\nSCORE: {value}") == value
