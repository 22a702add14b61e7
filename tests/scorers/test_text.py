"""exact, regex and choice scorers, with MMLU-style letter vectors."""

from __future__ import annotations

import pytest

from tuneloop.registry import scorers

exact = scorers.get("exact")()
regex = scorers.get("regex")()
choice = scorers.get("choice")()


def test_exact_normalizes() -> None:
    assert exact({"answer": "Paris"}, "  paris. ").value == 1.0
    assert exact({"answer": ["NYC", "New York"]}, "new   york").value == 1.0
    assert exact({"answer": "Paris"}, "Lyon").detail["reason"] == "mismatch"
    assert scorers.get("exact")(case_sensitive=True)({"answer": "Paris"}, "paris").value == 0.0
    assert exact({}, "x").value == 0.0


def test_regex() -> None:
    assert regex({"pattern": r"\bcat\b"}, "a cat sat").value == 1.0
    assert regex({"pattern": r"result=(\d+)", "answer": "7"}, "result=3 result=7").value == 1.0
    assert regex({"pattern": r"result=(\d+)", "answer": "7"}, "result=3").value == 0.0
    assert regex({"pattern": "("}, "x").detail["reason"].startswith("bad pattern")
    assert regex({}, "x").detail["reason"] == "no pattern given"


CHOICES = ["0", "4", "2", "6"]

# MMLU-style answers with the correct letter B, and whether each should count as correct.
MMLU = [
    ("B", 1),
    ("(B)", 1),
    ("B. 4", 1),
    ("The answer is (B).", 1),
    ("Answer: B", 1),
    ("I think the answer is a tricky one... The answer is C", 0),
    ("A) 0", 0),
    ("The correct option is (D) because 2*3 = 6.", 0),
    ("I am not sure.", 0),
    ("The answer is E", 0),  # E is not one of the four choices
]


@pytest.mark.parametrize(("completion", "label"), MMLU)
def test_mmlu_vectors(completion: str, label: int) -> None:
    assert choice({"answer": "B", "choices": CHOICES}, completion).value == label


def test_choice_reference_forms() -> None:
    assert choice({"answer": 1, "choices": CHOICES}, "B").value == 1.0
    assert choice({"answer": "4", "choices": CHOICES}, "(B)").value == 1.0
    assert "not a choice" in choice({"answer": "Z", "choices": CHOICES}, "B").detail["reason"]
