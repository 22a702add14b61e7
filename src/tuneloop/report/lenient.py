"""Lenient re-scoring: does a failing answer hold the reference value the scorer looked for?

The report's diagnosis (`report/diagnosis.py`) asks this of every failing challenger answer to
tell a *format* failure (the right value, in a shape the scorer rejected) from a wrong answer.
A lenient reading exists for a scorer whose reference is one value that can be looked for in
the text:

- `numeric`: some number in the answer, read as the scorer reads numbers
  (`scorers.numeric.parse_number`: thousands separators, sign, currency, `42.0`), equals the
  item's `answer` within the scorer's tolerance (`scorer_args.abs_tol` / `rel_tol`, else its
  default 1e-6). A number is a whole token: `42` is in "The answer is 42." and "42.0", not in
  "142", "1.42" or "-42".
- `exact`, and `regex` with an `answer`: the reference, normalised as the scorer normalises
  (`scorers.text.normalize_text`), appears in the normalised answer between non-word
  characters ("Paris" in "The capital is Paris.", not in "Parisian").

Any other scorer — `choice` (a letter is in almost every answer), `json` (tool calls and
schemas), `python_tests`, agent trajectories, judges, plugins — has no lenient reading:
`lenient_pass` returns None and the diagnosis counts the answer as "format not checked"
rather than guess. Deliberately an upper bound: an answer that names the reference and then
settles on another number reads as holding it.

Which scorer has which reading is keyed by the registered factory (looked up in the registry by
the row's scorer name), not by a list of names. Pure apart from that registry look-up.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from tuneloop.errors import InputError
from tuneloop.registry import scorers
from tuneloop.scorers.numeric import numeric as numeric_factory
from tuneloop.scorers.numeric import parse_number
from tuneloop.scorers.text import exact as exact_factory
from tuneloop.scorers.text import normalize_text
from tuneloop.scorers.text import regex as regex_factory

Reading = Callable[[Mapping[str, Any], str], bool | None]
"""`reading(item, answer)`: True when the answer holds the reference, False when it does not,
None when the item gives nothing to look for (no reference value)."""

NUMERIC_ABS_TOL = 1e-6
"""The `numeric` scorer's default absolute tolerance (its factory default, as evaluate
builds it); an item's `scorer_args.abs_tol` overrides it, as it does for the scorer."""

# A number as a whole token: not glued to a word character, dot or comma before it (so "142"
# yields 142 and "1.42" yields 1.42, never 42), read greedily to its end.
_NUMBER = re.compile(
    r"(?<![\w.,])[-+−]?[$€£]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?(?:/\d+)?"
)


def numbers_in(text: str) -> list[float]:
    """Every whole-token number of `text`, each read by the numeric scorer's own parser."""
    out = []
    for m in _NUMBER.finditer(text):
        value = parse_number(m.group(0))
        if value is not None:
            out.append(value)
    return out


def _args(item: Mapping[str, Any]) -> Mapping[str, Any]:
    args = item.get("scorer_args")
    return args if isinstance(args, Mapping) else {}


def lenient_number(item: Mapping[str, Any], answer: str) -> bool | None:
    """`numeric`'s lenient reading: the reference number is among the answer's numbers."""
    ref = item.get("answer")
    if isinstance(ref, bool):
        return None
    value = float(ref) if isinstance(ref, int | float) else parse_number(str(ref or ""))
    if value is None:
        return None
    args = _args(item)
    try:
        tol = max(
            float(args.get("abs_tol", NUMERIC_ABS_TOL)),
            float(args.get("rel_tol", 0.0)) * abs(value),
        )
    except (TypeError, ValueError):
        tol = NUMERIC_ABS_TOL
    return any(abs(x - value) <= tol for x in numbers_in(answer))


def lenient_text(item: Mapping[str, Any], answer: str) -> bool | None:
    """`exact`'s (and `regex`'s) lenient reading: a normalised reference is a phrase of the
    normalised answer."""
    refs = item.get("answer")
    refs = refs if isinstance(refs, list) else [refs]
    wanted = [w for r in refs if r is not None and (w := normalize_text(str(r)))]
    if not wanted:
        return None
    got = normalize_text(answer)
    return any(re.search(rf"(?<!\w){re.escape(w)}(?!\w)", got) for w in wanted)


READINGS: dict[Any, Reading] = {
    numeric_factory: lenient_number,
    exact_factory: lenient_text,
    regex_factory: lenient_text,  # None for a pattern-only item: it has no `answer`
}
"""The lenient reading of each registered scorer factory that has one."""


@cache
def reading_of(scorer: str | None) -> Reading | None:
    """The lenient reading of the scorer registered as `scorer`; None when it has none (or the
    name is not registered here)."""
    if scorer is None:
        return None
    try:
        factory = scorers.get(scorer)
    except InputError:
        return None
    return READINGS.get(factory)


def lenient_pass(scorer: str | None, item: Mapping[str, Any], answer: str) -> bool | None:
    """Whether `answer` holds `item`'s reference by `scorer`'s lenient reading; None when no
    lenient reading applies (see the module docstring)."""
    reading = reading_of(scorer)
    return None if reading is None else reading(item, answer)
