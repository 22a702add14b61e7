"""Text scorers: `exact` (normalized equality), `regex` (pattern match) and `choice` (a
multiple-choice letter).

    score = scorers.get("choice")()
    score({"answer": "B", "choices": ["1", "2", "3", "4"]}, "The answer is (B).")  # 1.0

`exact` compares after lower-casing, collapsing whitespace and stripping surrounding
punctuation and quotes (pass `case_sensitive=True` to keep case). `regex` takes its pattern
from the item's `pattern` (or `scorer_args.pattern`, or the factory's `pattern`); with an
`answer` it compares the last match's first group (or the whole match) to it, otherwise any
match scores 1. `choice` reads the letter from `answer is (B)`, `Answer: B`, a leading `B.`/`B)`,
or a lone letter; the reference may be a letter, a 0-based index or the text of a choice.
"""

from __future__ import annotations

import re
import string
from typing import Any

from tuneloop.plugins import Score, ScoreFn
from tuneloop.scorers.base import scorer

_STRIP = string.punctuation + string.whitespace + "“”‘’"


def normalize_text(text: str, case_sensitive: bool = False) -> str:
    """Collapse whitespace, strip surrounding punctuation/quotes, and lower-case by default."""
    text = " ".join(text.split()).strip(_STRIP)
    return text if case_sensitive else text.lower()


def _scorer_args(item: dict[str, Any]) -> dict[str, Any]:
    args = item.get("scorer_args")
    return args if isinstance(args, dict) else {}


@scorer("exact", inline=True)
def exact(case_sensitive: bool = False) -> ScoreFn:
    """1 when the normalized completion equals the normalized `answer` (or one of a list)."""

    def score(item: dict[str, Any], completion: str) -> Score:
        if not isinstance(completion, str):
            return Score(0.0, {"reason": "completion is not text"})
        refs = item.get("answer")
        refs = refs if isinstance(refs, list) else [refs]
        got = normalize_text(completion, case_sensitive)
        wanted = [normalize_text(str(r), case_sensitive) for r in refs if r is not None]
        if not wanted:
            return Score(0.0, {"reason": "item has no answer"})
        ok = got in wanted
        return Score(float(ok), {"extracted": got, **({} if ok else {"reason": "mismatch"})})

    return score


@scorer("regex", inline=True)
def regex(pattern: str | None = None, flags: str = "") -> ScoreFn:
    """Match a pattern; with an `answer`, compare the last match's group 1 (or whole match)."""

    def score(item: dict[str, Any], completion: str) -> Score:
        if not isinstance(completion, str):
            return Score(0.0, {"reason": "completion is not text"})
        pat = item.get("pattern") or _scorer_args(item).get("pattern") or pattern
        if not pat:
            return Score(0.0, {"reason": "no pattern given"})
        re_flags = re.IGNORECASE if "i" in (flags + _scorer_args(item).get("flags", "")) else 0
        try:
            matches = list(re.finditer(pat, completion, re_flags | re.MULTILINE))
        except re.error as err:
            return Score(0.0, {"reason": f"bad pattern: {err}"})
        if not matches:
            return Score(0.0, {"reason": "no match"})
        last = matches[-1]
        got = last.group(1) if last.groups() else last.group(0)
        if item.get("answer") is None:
            return Score(1.0, {"extracted": got})
        ok = normalize_text(got or "") == normalize_text(str(item["answer"]))
        return Score(float(ok), {"extracted": got, **({} if ok else {"reason": "mismatch"})})

    return score


_CHOICE_PATTERNS = (
    r"answer\s*(?:is|:)?\s*(?:option\s*)?[\(\[]?\s*(?-i:([A-Z]))\b",
    r"^\s*[\(\[]?([A-Z])[\)\].:]",
    r"[\(\[]([A-Z])[\)\]]",
    r"^\s*([A-Z])\s*$",
)


def extract_choice(completion: str, letters: str) -> str | None:
    """The chosen letter, trying explicit `answer is X` before weaker cues."""
    for pat in _CHOICE_PATTERNS:
        flags = re.MULTILINE | (re.IGNORECASE if pat.startswith("answer") else 0)
        for m in reversed(list(re.finditer(pat, completion, flags))):
            letter = m.group(1).upper()
            if letter in letters:
                return letter
    return None


def _reference_letter(item: dict[str, Any], letters: str) -> str | None:
    ref = item.get("answer")
    choices = item.get("choices")
    if isinstance(ref, int) and not isinstance(ref, bool) and 0 <= ref < len(letters):
        return letters[ref]
    if isinstance(ref, str):
        if len(ref.strip()) == 1 and ref.strip().upper() in letters:
            return ref.strip().upper()
        if isinstance(choices, list) and ref in choices:
            return letters[choices.index(ref)]
    return None


@scorer("choice", inline=True)
def choice(n_choices: int = 10) -> ScoreFn:
    """1 when the chosen letter equals the reference (letter, index or choice text)."""

    def score(item: dict[str, Any], completion: str) -> Score:
        if not isinstance(completion, str):
            return Score(0.0, {"reason": "completion is not text"})
        choices = item.get("choices")
        n = len(choices) if isinstance(choices, list) and choices else n_choices
        letters = string.ascii_uppercase[: min(n, 26)]
        ref = _reference_letter(item, letters)
        if ref is None:
            return Score(0.0, {"reason": f"reference {item.get('answer')!r} is not a choice"})
        got = extract_choice(completion, letters)
        if got is None:
            return Score(0.0, {"reason": "no choice letter found"})
        ok = got == ref
        return Score(float(ok), {"extracted": got, **({} if ok else {"reason": "wrong choice"})})

    return score
