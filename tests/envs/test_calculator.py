"""The calculator tool: arithmetic only, bounded, never `eval()`."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tuneloop.envs import ToolError
from tuneloop.envs.calculator import calculator, evaluate_expression, format_number
from tuneloop.registry import tools


def test_registered_with_its_schema() -> None:
    fn = tools.get("calculator")
    assert fn is calculator
    assert fn.parameters["required"] == ["expression"]


@pytest.mark.parametrize(
    ("expression", "want"),
    [
        ("37 * 45 + 12", "1677"),
        ("7 / 2", "3.5"),
        ("6 / 3", "2"),
        ("(2 + 3) * -4", "-20"),
        ("2 ** 10", "1024"),
        ("2 ^ 10", "1024"),
        ("17 // 5 + 17 % 5", "5"),
        ("1.5e3 + 1", "1501"),
    ],
)
def test_arithmetic(expression: str, want: str) -> None:
    assert calculator(expression) == want


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("__import__('os').system('true')", "not allowed"),
        ("x + 1", "not allowed"),
        ("'a' * 3", "not allowed"),
        ("True + 1", "not allowed"),
        ("1 / 0", "division by zero"),
        ("2 ** 1000", "exponent"),
        ("(10 ** 60) ** 60 ** 1", "too large"),
        ("1 +", "not an arithmetic expression"),
        ("1" * 201, "longer than"),
        ("(-8) ** 0.5", "not a real number"),
        ("1e308 * 10", "not finite"),
    ],
)
def test_anything_else_is_a_tool_error(expression: str, reason: str) -> None:
    with pytest.raises(ToolError, match=reason):
        evaluate_expression(expression)


@given(st.integers(-(10**6), 10**6), st.integers(-(10**6), 10**6), st.sampled_from("+-*"))
def test_matches_python_on_integers(a: int, b: int, op: str) -> None:
    want = {"+": a + b, "-": a - b, "*": a * b}[op]
    assert calculator(f"{a} {op} ({b})") == str(want)


def test_format_number() -> None:
    assert format_number(2.0) == "2" and format_number(0.1 + 0.2) == "0.30000000000000004"
