"""python_tests scorer: code extraction and HumanEval-style vectors with known labels."""

from __future__ import annotations

import pytest

from tuneloop.registry import scorers
from tuneloop.scorers.python_tests import build_program, extract_code

score = scorers.get("python_tests")(wall_s=10, cpu_s=5)

# HumanEval/0-style problem (prompt = signature + docstring, tests define check(candidate)).
HAS_CLOSE = {
    "prompt": (
        "from typing import List\n\n\ndef has_close_elements(numbers: List[float], "
        "threshold: float) -> bool:\n"
        '    """Check if any two numbers are closer to each other than threshold."""\n'
    ),
    "entry_point": "has_close_elements",
    "tests": (
        "def check(candidate):\n"
        "    assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True\n"
        "    assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.05) == False\n"
        "    assert candidate([1.0, 2.0, 5.9, 4.0, 5.0], 0.95) == True\n"
        "    assert candidate([1.1, 2.2, 3.1, 4.1, 5.1], 1.0) == True\n"
    ),
}
CORRECT_BODY = (
    "    for i, a in enumerate(numbers):\n"
    "        for j, b in enumerate(numbers):\n"
    "            if i != j and abs(a - b) < threshold:\n"
    "                return True\n"
    "    return False\n"
)
WRONG_BODY = "    return abs(numbers[0] - numbers[1]) < threshold\n"
CHAT_CORRECT = (
    "Here is a solution:\n```python\ndef has_close_elements(numbers, threshold):\n"
    "    s = sorted(numbers)\n"
    "    return any(b - a < threshold for a, b in zip(s, s[1:]))\n```\nIt sorts first."
)
CHAT_SYNTAX_ERROR = "```python\ndef has_close_elements(numbers, threshold)\n    return True\n```"

HUMANEVAL = [
    (CORRECT_BODY, 1),  # continuation of the prompt
    (WRONG_BODY, 0),
    (CHAT_CORRECT, 1),  # a full function in a fenced block
    (CHAT_SYNTAX_ERROR, 0),
    ("I cannot solve this.", 0),
]


@pytest.mark.parametrize(("completion", "label"), HUMANEVAL)
def test_humaneval_vectors(completion: str, label: int) -> None:
    assert score(HAS_CLOSE, completion).value == label


def test_extract_code_prefers_block_defining_entry_point() -> None:
    text = "```\nprint('helper')\n```\n```python\ndef f():\n    return 1\n```"
    assert extract_code(text, "f").startswith("def f")
    assert extract_code(text) == "print('helper')\n"
    assert extract_code("no fences") == "no fences"


def test_build_program_appends_check_call_once() -> None:
    program = build_program(HAS_CLOSE, CORRECT_BODY)
    assert program.startswith("from typing import List")
    assert program.count("check(has_close_elements)") == 1


def test_failure_reports_reason_and_stderr() -> None:
    result = score({"tests": "assert add(1, 1) == 3"}, "def add(a, b):\n    return a + b")
    assert result.value == 0.0
    assert result.detail["reason"] == "exit_1" and "AssertionError" in result.detail["stderr_tail"]
    assert score({}, "x").detail["reason"] == "item has no tests"
