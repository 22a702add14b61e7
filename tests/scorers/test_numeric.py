"""numeric scorer: extraction rules, tolerance, and GSM8K-style vectors with known labels."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tuneloop.registry import scorers
from tuneloop.scorers.numeric import extract_answer, parse_number

score = scorers.get("numeric")()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("37 + 45 = 82", 37.0),
        ("1,234,567 apples", 1234567.0),
        ("it costs $1,250.50 in total", 1250.5),
        ("temperature is -5 degrees", -5.0),
        ("temperature is −7 degrees", -7.0),
        ("42km", 42.0),
        ("3/4 of them", 0.75),
        ("1.5e3 grams", 1500.0),
        ("no digits here", None),
        ("5-3", 5.0),
    ],
)
def test_parse_number(text: str, expected: float | None) -> None:
    assert parse_number(text) == expected


def test_final_answer_precedence() -> None:
    assert extract_answer("We get 3 then 4.\n#### 7\nextra 9") == (7.0, "####")
    assert extract_answer(r"so \boxed{12} and #### 5") == (12.0, "boxed")
    assert extract_answer("The answer is 18. Check: 18 - 3 = 15") == (18.0, "answer is")
    assert extract_answer("A: 4\nsome 99") == (4.0, "answer is")
    assert extract_answer("5-3=2") == (2.0, "last number")


# GSM8K-style worked solutions (train-set format) with their correctness labels.
GSM8K = [
    ("72", "Natalia sold 48/2 = 24 clips in May.\nIn total she sold 48+24 = 72 clips.\n#### 72", 1),
    (
        "10",
        "Weng earns 12/60 = $0.2 per minute.\nFor 50 minutes she earned 0.2 x 50 = $10.\n#### 10",
        1,
    ),
    ("5", "Betty has 100/2 = $50. Her parents give $15, grandparents 15*2 = $30.\n#### 95", 0),
    ("1,080", "She runs 3 sprints 3 times a week, 60 m each: 3*3*60 = 1080 meters.", 1),
    ("-3", "The balance changes from 4 to 1 overall: the answer is -3.", 1),
    ("18", "Janet sells 16 - 3 - 4 = 9 eggs at $2: 9 * 2 = $18 every day. The answer is $18.", 1),
    ("18", "Janet makes 16 - 3 - 4 = 9 dollars.", 0),
]


@pytest.mark.parametrize(("answer", "completion", "label"), GSM8K)
def test_gsm8k_vectors(answer: str, completion: str, label: int) -> None:
    assert score({"answer": answer}, completion).value == label


def test_tolerance_and_reasons() -> None:
    assert score({"answer": 0.5}, "about 0.5000001").value == 1.0
    assert score({"answer": 100, "scorer_args": {"rel_tol": 0.02}}, "101").value == 1.0
    assert score({"answer": 100}, "101").value == 0.0
    bad = score({"answer": "82"}, "I do not know")
    assert bad.value == 0.0 and "no number" in bad.detail["reason"]
    assert score({"answer": "n/a"}, "5").detail["reason"].startswith("reference")
    assert score({"answer": "1"}, None).value == 0.0  # type: ignore[arg-type]


@given(st.integers(min_value=-(10**12), max_value=10**12))
def test_formatted_integers_round_trip(n: int) -> None:
    assert score({"answer": str(n)}, f"The result is {n:,}.").value == 1.0
    assert score({"answer": n}, f"#### {n}").value == 1.0


@given(st.text(max_size=200))
def test_never_raises_on_arbitrary_output(text: str) -> None:
    assert 0.0 <= score({"answer": "7"}, text).value <= 1.0
