"""`numeric`: the final number of a completion vs the item's `answer`, within a tolerance.

The final answer is taken from the first of these that is present, so that a worked solution's
intermediate numbers do not count: `\\boxed{…}` (last one), `#### 42` (GSM8K), `answer is 42` /
`answer: 42` / `A: 42` (last one), and otherwise the last number in the text. Numbers may carry
thousands separators (`1,234`), a sign (`-5`, `−5`), a currency sign, a trailing unit or `%`
(`42 km` → 42), a decimal part or an exponent, or be a simple fraction (`3/4`).

Tolerance: |pred − ref| ≤ max(abs_tol, rel_tol·|ref|); factory keywords set the defaults and an
item's `scorer_args` may override them. Deliberately, `%` is dropped rather than scaled
(`50%` → 50), matching how GSM8K-style references are written.

    from tuneloop.registry import scorers
    score = scorers.get("numeric")()
    score({"answer": "82"}, "37 + 45 = 82")   # Score(value=1.0, …)
"""

from __future__ import annotations

import math
import re
from typing import Any

from tuneloop.plugins import Score, ScoreFn
from tuneloop.scorers.base import scorer

# A number not glued to a preceding word character or dot (so "x2" and "v1.5" are not signed
# negatives and "5-3" does not yield -3).
_NUM = re.compile(
    r"(?<![\w.])(?P<sign>[-+−]?)\s?[$€£]?\s?"
    r"(?P<int>\d{1,3}(?:,\d{3})+|\d+)?(?P<frac>\.\d+)?(?:[eE](?P<exp>[-+]?\d+))?"
    r"(?:\s?/\s?(?P<den>\d+)(?![\d.]))?"
)
_BOXED = re.compile(r"\\boxed\s*\{((?:[^{}]|\{[^{}]*\})*)\}")
_HASHES = re.compile(r"####\s*(.+)")
_ANSWER = re.compile(r"(?:answer\s*(?:is|:|=)|(?:^|\n)\s*A\s*:)\s*(?:\*\*)?\s*(.+)", re.IGNORECASE)


def parse_number(text: str, last: bool = False) -> float | None:
    """The first (or last) number in `text`, or None. Commas, signs, units, fractions allowed."""
    found: float | None = None
    for m in _NUM.finditer(text):
        if m.group("int") is None and m.group("frac") is None:
            continue
        value = _to_float(m)
        if value is None:
            continue
        if not last:
            return value
        found = value
    return found


def _to_float(m: re.Match[str]) -> float | None:
    digits = (m.group("int") or "0").replace(",", "") + (m.group("frac") or "")
    try:
        value = float(digits)
        if m.group("exp"):
            value *= 10.0 ** int(m.group("exp"))
        if m.group("den"):
            den = int(m.group("den"))
            if den == 0 or m.group("frac") or m.group("exp"):
                return None
            value /= den
    except (ValueError, OverflowError, ZeroDivisionError):
        return None
    if m.group("sign") in ("-", "−"):
        value = -value
    return value if math.isfinite(value) else None


def extract_answer(completion: str) -> tuple[float | None, str]:
    """(number, how it was found) for the completion's final answer."""
    boxed = _BOXED.findall(completion)
    if boxed:
        return parse_number(boxed[-1]), "boxed"
    hashes = _HASHES.search(completion)
    if hashes:
        return parse_number(hashes.group(1)), "####"
    answers = list(_ANSWER.finditer(completion))
    for m in reversed(answers):
        value = parse_number(m.group(1))
        if value is not None:
            return value, "answer is"
    return parse_number(completion, last=True), "last number"


def _tolerance(item: dict[str, Any], abs_tol: float, rel_tol: float) -> tuple[float, float]:
    args = item.get("scorer_args") or {}
    if not isinstance(args, dict):
        return abs_tol, rel_tol
    return float(args.get("abs_tol", abs_tol)), float(args.get("rel_tol", rel_tol))


@scorer("numeric", inline=True)
def numeric(abs_tol: float = 1e-6, rel_tol: float = 0.0) -> ScoreFn:
    """Score 1 when the completion's final number equals `item["answer"]` within tolerance."""

    def score(item: dict[str, Any], completion: str) -> Score:
        ref = item.get("answer")
        ref_value = float(ref) if isinstance(ref, (int, float)) else parse_number(str(ref or ""))
        if ref_value is None:
            return Score(0.0, {"reason": f"reference answer {ref!r} is not a number"})
        if not isinstance(completion, str):
            return Score(0.0, {"reason": "completion is not text"})
        pred, how = extract_answer(completion)
        if pred is None:
            return Score(0.0, {"reason": "no number in completion", "method": how})
        a_tol, r_tol = _tolerance(item, abs_tol, rel_tol)
        ok = abs(pred - ref_value) <= max(a_tol, r_tol * abs(ref_value))
        detail = {"extracted": pred, "expected": ref_value, "method": how}
        if not ok:
            detail["reason"] = "wrong answer"
        return Score(1.0 if ok else 0.0, detail)

    return score
