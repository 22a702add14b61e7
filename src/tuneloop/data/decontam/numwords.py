"""English number words ↔ digits: `spell_number(38) == "thirty-eight"`, and
`words_to_digits("thirty-eight plus five") == "38 plus 5"`.

Used by decontamination to compare an item and a row whatever way they write their numbers
(the recall audit's "numbers spelled out" mutation; `audit.py`), and by the audit to
make that mutation. Cardinals only, 0 to 10¹²−1, in the usual forms: "thirty-eight",
"thirty eight", "one hundred and five", "two thousand three hundred". Deliberately left alone:
ordinals ("second"), fractions ("a half"), "a hundred" (the article is not a number), and
digit groups ("1,000"). A run of number words never crosses a line break.
"""

from __future__ import annotations

import re

ONES = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
TENS = ["_", "_", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
SCALES = (("billion", 10**9), ("million", 10**6), ("thousand", 10**3))
_VALUE = {w: i for i, w in enumerate(ONES)} | {w: 10 * i for i, w in enumerate(TENS) if i > 1}
_MULT = dict(SCALES) | {"hundred": 100}
_WORD = "|".join(sorted([*_VALUE, *_MULT], key=len, reverse=True))
# A run of number words joined by spaces, tabs, a hyphen or " and " — never a newline, and
# never " - ", a minus sign. It starts with a value word: "hundred" alone is not a number.
_RUN = re.compile(
    rf"\b(?:{'|'.join(sorted(_VALUE, key=len, reverse=True))})\b"
    rf"(?:(?:-|[ \t]+(?:and[ \t]+)?)(?:{_WORD})\b)*",
    re.IGNORECASE,
)


def spell_number(n: int) -> str:
    """`n` (0 ≤ n < 10¹²) in English words, hyphenating 21-99 ("thirty-eight")."""
    if not 0 <= n < 10**12:
        raise ValueError(f"{n} is out of range (0 to 10**12 - 1)")
    if n < 20:
        return ONES[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return TENS[tens] + (f"-{ONES[ones]}" if ones else "")
    if n < 1000:
        hundreds, rest = divmod(n, 100)
        return f"{ONES[hundreds]} hundred" + (f" {spell_number(rest)}" if rest else "")
    for name, size in SCALES:
        if n >= size:
            high, rest = divmod(n, size)
            return f"{spell_number(high)} {name}" + (f" {spell_number(rest)}" if rest else "")
    raise AssertionError("unreachable")


def spell_digits(text: str) -> str:
    """Every run of ASCII digits in `text` spelled out (runs of 13+ digits are left alone)."""
    return re.sub(r"\d{1,12}", lambda m: spell_number(int(m.group())), text)


def _parse(words: list[str]) -> list[int]:
    """Number words → the numbers they say, split where a new number must start
    ("three five" → [3, 5]; "twenty one" → [21])."""
    out: list[int] = []
    total = current = 0
    last = None  # the kind of the previous word: "one", "teen", "ten", "hundred", "scale"
    for w in words:
        if w in _MULT:
            m = _MULT[w]
            if m == 100:
                current = (current or 1) * 100
                last = "hundred"
            else:
                total += (current or 1) * m
                current, last = 0, "scale"
            continue
        v = _VALUE[w]
        kind = "ten" if v >= 20 else "teen" if v >= 10 else "one"
        fits = (
            last is None
            or last in ("hundred", "scale")
            and (current % 100 == 0)
            or (last == "ten" and kind == "one")
        )
        if not fits:
            out.append(total + current)
            total = current = 0
        current += v
        last = kind
    out.append(total + current)
    return out


def words_to_digits(text: str) -> str:
    """`text` with every run of English number words replaced by its digits."""

    def repl(m: re.Match[str]) -> str:
        parts: list[str] = []
        words: list[str] = []
        for w in (w for w in re.split(r"[\s-]+", m.group().lower()) if w):
            if w != "and":
                words.append(w)
            elif words[-1] not in _MULT:  # "three and four" is two numbers and an "and"
                parts += [str(n) for n in _parse(words)] + ["and"]
                words = []
        return " ".join(parts + [str(n) for n in _parse(words)])

    return _RUN.sub(repl, text)
