"""The decontamination recall audit: how many disguised suite items does the rule catch?

`corpus build` plants canaries — copies of randomly drawn suite items, each disguised by one
mutation — among the candidate rows right before decontamination, runs the same matcher over
rows and canaries together, and reports per mutation how many canaries it removed (recall).
Canaries never reach an output: they are planted in the matcher's input only, and their
indices are taken out of its answer. A `decontaminate.audit.min_recall` below which a
mutation falls fails the build (exit 2, nothing written).

The mutations (pure functions of the prompt text and a seeded `random.Random`):
- `verbatim` — the item's prompt as it is;
- `rewrapped` — re-wrapped to short lines (width 12), as a pasted, hard-wrapped copy;
- `in_filler` — embedded in a sentence of filler before and after;
- `case_whitespace` — letters' case flipped at random, every space a run of spaces/tabs;
- `numbers_spelled` — every digit run written out in English words ("38" → "thirty-eight").
A mutation that would leave a prompt unchanged (no digits to spell) skips that item, so its
recall measures only real disguises; with no such item it is `None`, "not measured".

Deliberately measured on removal, not on the item matched: a canary counts as caught when
decontamination removes it for any suite item, which is what keeps it out of the corpus.
"""

from __future__ import annotations

import random
import re
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tuneloop.data.decontam.match import RowText
from tuneloop.data.decontam.numwords import spell_digits
from tuneloop.data.text import conversation_text

Mutation = Literal["verbatim", "rewrapped", "in_filler", "case_whitespace", "numbers_spelled"]

FILLER_BEFORE = (
    "I was going through my notes from last week and found this one again.",
    "Quick question before the meeting starts, my colleague asked me about it.",
    "Sorry if this is a silly one, but it has been bugging me all morning.",
)
FILLER_AFTER = (
    "Thanks a lot, no rush on this at all.",
    "Please keep the answer short if you can.",
    "I will check back in an hour or so, cheers.",
)


def verbatim(text: str, rng: random.Random) -> str:
    return text


def rewrapped(text: str, rng: random.Random, width: int = 12) -> str:
    return "\n".join(textwrap.wrap(text, width=width, break_long_words=False)) or text


def in_filler(text: str, rng: random.Random) -> str:
    return f"{rng.choice(FILLER_BEFORE)} {text} {rng.choice(FILLER_AFTER)}"


def case_whitespace(text: str, rng: random.Random) -> str:
    flipped = "".join(c.swapcase() if rng.random() < 0.5 else c for c in text)
    return re.sub(r" ", lambda _: rng.choice(("  ", "\t", " \t ", "   ")), flipped)


def numbers_spelled(text: str, rng: random.Random) -> str:
    return spell_digits(text)


MUTATIONS: dict[str, Callable[[str, random.Random], str]] = {
    "verbatim": verbatim,
    "rewrapped": rewrapped,
    "in_filler": in_filler,
    "case_whitespace": case_whitespace,
    "numbers_spelled": numbers_spelled,
}
CANARY_ANSWER = "OK."


@dataclass(frozen=True)
class Canary:
    """One planted, disguised suite item."""

    mutation: str
    suite: str
    item_id: str
    row: RowText
    """What the matcher sees: a user turn holding the disguised prompt, and a reply."""


def plant(items: Sequence[tuple[str, str, str]], per_mutation: int, seed: int) -> list[Canary]:
    """Up to `per_mutation` canaries per mutation from (suite, item id, prompt) triples,
    drawn without replacement by a seeded RNG (one draw per mutation)."""
    rng = random.Random(seed)
    out: list[Canary] = []
    for name, mutate in MUTATIONS.items():
        pool = list(items)
        rng.shuffle(pool)
        planted = 0
        for suite, item_id, prompt in pool:
            if planted == per_mutation:
                break
            text = mutate(prompt, rng)
            if name != "verbatim" and text == prompt:
                continue  # no disguise to test (e.g. no digits to spell out)
            messages = [
                {"role": "user", "content": text},
                {"role": "assistant", "content": CANARY_ANSWER},
            ]
            out.append(Canary(name, suite, item_id, RowText(conversation_text(messages), text)))
            planted += 1
    return out


def recall_report(canaries: Sequence[Canary], caught: set[int]) -> dict[str, dict[str, Any]]:
    """Per mutation: planted, caught, recall (None when none planted) and the missed items
    (suite, id; at most 10)."""
    report: dict[str, dict[str, Any]] = {}
    for name in MUTATIONS:
        mine = [(i, c) for i, c in enumerate(canaries) if c.mutation == name]
        hit = sum(1 for i, _ in mine if i in caught)
        missed = [{"suite": c.suite, "item": c.item_id} for i, c in mine if i not in caught]
        report[name] = {
            "planted": len(mine),
            "caught": hit,
            "recall": hit / len(mine) if mine else None,
            "missed": missed[:10],
        }
    return report


def recall_failures(
    report: dict[str, dict[str, Any]],
    min_recall: float | None,
    per_mutation: Mapping[str, float],
) -> list[str]:
    """`decontaminate.audit...: mutation recall r < bar` for every mutation below its bar."""
    out = []
    for name, row in report.items():
        bar = per_mutation.get(name, min_recall)
        if bar is None or row["recall"] is None or row["recall"] >= bar:
            continue
        key = f"min_recall_by_mutation.{name}" if name in per_mutation else "min_recall"
        out.append(
            f"decontaminate.audit.{key}: recall on '{name}' canaries is {row['recall']:.3f} "
            f"({row['caught']}/{row['planted']} caught) < {bar:g}"
        )
    return out
