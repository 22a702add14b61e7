"""Reading a judgement, strictly: the last non-empty line is the verdict, or nothing is.

    parse_grade("The answer is right.\\nSCORE: 0.8")   # 0.8
    parse_verdict("B explains more.\\nVERDICT: b")     # "B"

Grade: `SCORE: <number>` (case-insensitive, optional `**` emphasis), the number in [0, 1];
pairwise: `VERDICT: A`, `VERDICT: B` or `VERDICT: TIE`. Deliberately no search through the
prose for a number that looks like a score: a judgement that does not end in the declared
form is `Unparsable` — the caller asks again and, failing that, records a harness error —
because a lenient parser turns a judge's rambling into scores nobody can audit.
"""

from __future__ import annotations

import math
import re

_GRADE = re.compile(r"^\**\s*score\s*\**\s*[:=]\s*\**\s*([-+]?\d+(?:\.\d+)?)\s*\**\s*$", re.I)
_VERDICT = re.compile(r"^\**\s*verdict\s*\**\s*[:=]\s*\**\s*(a|b|tie)\s*\**\s*$", re.I)


class Unparsable(ValueError):
    """A judgement not in the declared form; the message says what was wrong."""


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        raise Unparsable("empty judgement")
    return lines[-1]


def parse_grade(text: str) -> float:
    """The grade in [0, 1] on the judgement's last line; Unparsable otherwise."""
    line = _last_line(text)
    found = _GRADE.match(line)
    if found is None:
        raise Unparsable(f"last line is not `SCORE: <0..1>`: {line[:80]!r}")
    value = float(found.group(1))
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise Unparsable(f"score {value} is outside [0, 1]")
    return value


def parse_verdict(text: str) -> str:
    """ "A", "B" or "TIE" from the judgement's last line; Unparsable otherwise."""
    line = _last_line(text)
    found = _VERDICT.match(line)
    if found is None:
        raise Unparsable(f"last line is not `VERDICT: A|B|TIE`: {line[:80]!r}")
    return found.group(1).upper()
