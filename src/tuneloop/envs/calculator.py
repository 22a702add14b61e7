"""`calculator`: a safe arithmetic evaluator (no `eval()`): numbers, + - * / // % **, unary
signs and parentheses, walked on Python's own `ast` with every other node refused.

    calculator("37 * 45 + 12")   # "1677"
    calculator("7 / 2")          # "3.5"

Deliberately bounded so that a model cannot make a tool call expensive: expressions of at
most 200 characters, exponents of at most 64 in magnitude, integers of at most 4,000 bits.
An integral result prints without a decimal point (`6 / 3` → "2"), so a numeric answer reads
the same whichever operator produced it. Division by zero, an overflow or anything that is not
arithmetic raises `ToolError` (a failed call, told to the model).
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from tuneloop.envs.base import ToolError, tool

MAX_CHARS = 200
MAX_EXPONENT = 64
MAX_BITS = 4000

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}


def evaluate_expression(expression: str) -> int | float:
    """The value of an arithmetic expression; ToolError for anything else (see above)."""
    if len(expression) > MAX_CHARS:
        raise ToolError(f"expression longer than {MAX_CHARS} characters")
    try:
        tree = ast.parse(expression.strip().replace("^", "**"), mode="eval")
    except SyntaxError:
        raise ToolError(f"not an arithmetic expression: {expression!r}") from None
    return _value(tree.body)


def _value(node: ast.AST) -> int | float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value  # type: ignore[return-value]
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_value(node.operand))  # type: ignore[no-any-return]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _value(node.left), _value(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ToolError(f"exponent {right} is larger than {MAX_EXPONENT}")
        try:
            out = _BINARY[type(node.op)](left, right)
        except ZeroDivisionError:
            raise ToolError("division by zero") from None
        except OverflowError:
            raise ToolError("the result is too large") from None
        if isinstance(out, complex):
            raise ToolError("the result is not a real number")
        if isinstance(out, int) and out.bit_length() > MAX_BITS:
            raise ToolError("the result is too large")
        if isinstance(out, float) and not math.isfinite(out):
            raise ToolError("the result is not finite")
        return out  # type: ignore[no-any-return]
    raise ToolError(f"not allowed in an arithmetic expression: {type(node).__name__}")


def format_number(value: int | float) -> str:
    """An integral value without a decimal point; other floats as repr (shortest exact)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return str(value)


@tool(
    "calculator",
    description="Evaluate an arithmetic expression (+ - * / // % ** and parentheses).",
    parameters={
        "type": "object",
        "properties": {
            "expression": {"type": "string", "description": "For example: (37 + 45) * 2"}
        },
        "required": ["expression"],
        "additionalProperties": False,
    },
)
def calculator(expression: str) -> str:
    """The expression's value as text."""
    return format_number(evaluate_expression(expression))
