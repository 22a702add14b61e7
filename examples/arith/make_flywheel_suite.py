"""Generate the flywheel's larger arithmetic suite: `flywheel_suite.jsonl` (480 items).

Run: `python examples/arith/make_flywheel_suite.py [--out FILE]` (default: this folder's
`flywheel_suite.jsonl`). Byte-identical on every run: one `random.Random` with a fixed seed
over a sorted pool, files written in a fixed key order with `\\n` line ends.

What it is for: the flywheel (issue 15) gates every round on the next unconsumed slice of a
suite, and a slice is looked at once, so it needs more items than `suite.jsonl` (320, one
dev/gate split). 480 items leave room for an audit part plus several rolling gate slices of
40+ items each: `audit: 0.2` and eight slices of `0.1` give 85 and 43-58 items by id hash
(96 and 48 each with `stratify_by_tag`, whose first tag is the operation).

Measured (2026-12-01, this 2-core CPU, `tuneloop serve examples/arith/model`, then `tuneloop
eval --max-tokens 8`, greedy): the embedded base model scores 24.6% (118/480): `symbolic`
92.5%, `words` 2.5%, `chatty` 2.5%, `story` 0.8% (120 items each); 31 of the 480
completions hit the 8-token limit; 4.8 s for the suite.

Same item format as `suite.jsonl` (`id`, one user message, `answer`, `scorer: numeric`, tags
`[op, digits, style]`), with two differences, both deliberate:

- **Styles.** The third tag is the wording style, and the suite spans every style the traffic
  simulator (`simulate_traffic.py`) asks in, a quarter each: `symbolic` and `words` (the four
  phrasings of `make_data.PHRASINGS`, so these two tags mean what they mean in `suite.jsonl`),
  `chatty` (longer, polite requests) and `story` (short word problems). Users drift toward the
  last two over time; a gate slice therefore measures the model on the traffic it will get.
- **Held out from everything the model or a trainer has seen.** No item asks a fact
  `(op, larger, smaller)` - a problem whatever its wording, and a sum in either operand order -
  that `suite.jsonl`, `train_prompts.jsonl`, the production traces or the model's pretraining
  stream (`build_model.pretraining_problems`, recomputed) asks, and no two items ask the same
  fact. This is stronger than disjoint normalized prompts (the test checks both) and than
  `make_data`'s ordered problems. The price: the suite and the training prompts take all 155
  one-digit problems, and the pretraining stream covers all but one problem with a one-digit
  operand, so the held-out pool is 2-digit ± 2-digit (tag `2d`; 294 sums and 293 differences),
  harder on average than `suite.jsonl` (more carries and borrows).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # sibling scripts, also when imported by the tests

import make_data as md  # noqa: E402

SEED = 20260404
COUNTS = {"add": 240, "sub": 240}
"""Items per operation (480 in all), of 294 held-out sums and 293 held-out differences."""

STYLE_ORDER = ("symbolic", "words", "chatty", "story")
"""Styles in the order items cycle through them (so each is exactly a quarter of an op)."""

STYLES: dict[str, dict[str, tuple[str, ...]]] = {
    "symbolic": {"add": md.PHRASINGS["add"][:1], "sub": md.PHRASINGS["sub"][:1]},
    "words": {"add": md.PHRASINGS["add"][1:], "sub": md.PHRASINGS["sub"][1:]},
    "chatty": {
        "add": (
            "Hi! Quick question: what is {a} + {b}?",
            "Could you please tell me what {a} plus {b} equals?",
            "Please work out the total of {a} and {b} for me.",
            "I am checking my homework. What do you get when you add {b} to {a}?",
        ),
        "sub": (
            "Hi! Quick question: what is {a} - {b}?",
            "Could you please tell me what {a} minus {b} equals?",
            "Please work out the difference between {a} and {b} for me.",
            "I am checking my homework. What do you get when you take {b} away from {a}?",
        ),
    },
    "story": {
        "add": (
            "Tom has {a} apples and his sister gives him {b} more. How many apples does he have?",
            "A shelf holds {a} books and another holds {b}. How many books are there in all?",
            "There are {a} cars in a lot and {b} more park there. How many cars are in the lot?",
        ),
        "sub": (
            "Tom has {a} apples and gives {b} of them to his sister. How many are left?",
            "A bus carries {a} people and {b} get off. How many people are still on the bus?",
            "There were {a} birds on a wire and {b} flew away. How many birds are left?",
        ),
    },
}
"""Question templates per style and operation ({a} ≥ {b} for subtraction). `symbolic` and
`words` are exactly `make_data.PHRASINGS`; `chatty` and `story` are new to the model. Every
template renders to at most 100 prompt tokens with 2-digit operands (the model's context is
128 positions; a test checks it)."""


@dataclass(frozen=True, order=True)
class Question:
    """One arithmetic problem asked in one template of one style."""

    problem: md.Problem
    """The problem (its `phrasing` is always 0: the disjointness key)."""
    style: str
    template: int
    """Index into `STYLES[style][problem.op]`."""

    @property
    def prompt(self) -> str:
        p = self.problem
        return STYLES[self.style][p.op][self.template].format(a=p.a, b=p.b)

    @property
    def answer(self) -> str:
        return self.problem.answer


def _template_re(template: str, anchored: bool = True) -> re.Pattern[str]:
    pattern = re.escape(template).replace(r"\{a\}", r"(?P<a>\d+)").replace(r"\{b\}", r"(?P<b>\d+)")
    return re.compile(f"^{pattern}$" if anchored else pattern)


_QUESTION_RES = [
    (_template_re(t), style, op, i)
    for style, by_op in STYLES.items()
    for op, templates in by_op.items()
    for i, t in enumerate(templates)
]


def parse_question(text: str) -> Question:
    """Inverse of `Question.prompt` for every style (the simulator and the tests use it)."""
    for pattern, style, op, i in _QUESTION_RES:
        m = pattern.match(text)
        if m is not None:
            return Question(md.Problem(int(m["a"]), op, int(m["b"])), style, i)
    raise ValueError(f"not a flywheel arithmetic question: {text!r}")


def user_prompt(item: dict[str, Any]) -> str:
    """The (last) user message of a suite item."""
    messages = item["messages"]
    assert isinstance(messages, list), item.get("id")
    return str(messages[-1]["content"])


def trace_problems(path: Path) -> list[md.Problem]:
    """Problems asked anywhere in a traffic/trace JSONL (a `make_data` wording inside a user
    message, also behind a prefix such as the traces' planted e-mail); torn lines are skipped."""
    searches = [
        (_template_re(t, anchored=False), op)
        for op, templates in md.PHRASINGS.items()
        for t in templates
    ]
    found: list[md.Problem] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            messages = json.loads(line)["request"]["messages"]
        except (json.JSONDecodeError, KeyError, TypeError):
            continue
        for message in messages:
            text = str(message.get("content", ""))
            for pattern, op in searches:
                for m in pattern.finditer(text):
                    found.append(md.Problem(int(m["a"]), op, int(m["b"])))
    return found


Fact = tuple[str, int, int]
"""What a problem asks, whatever its wording or operand order: (op, larger, smaller)."""


def fact(p: md.Problem) -> Fact:
    """`37 + 45` and `45 + 37` are one fact (a sum's answer does not depend on the order)."""
    return (p.op, max(p.a, p.b), min(p.a, p.b))


def seen_facts(arith_dir: Path = HERE) -> set[Fact]:
    """The facts of the suite, the training prompts, the traces and the pretraining stream."""
    import build_model as bm  # here, not at the top: it imports the tokenizer library

    suite_path = arith_dir / "suite.jsonl"
    seen = [md.problem_of(it) for it in md.read_items(suite_path)]
    seen += [md.problem_of(it) for it in md.read_items(arith_dir / "train_prompts.jsonl")]
    seen += trace_problems(arith_dir / "traces" / "production.jsonl")
    seen += bm.pretraining_problems(bm.STEPS * bm.BATCH, suite_path)
    return {fact(p) for p in seen}


def held_out_pool(op: str, seen: set[Fact]) -> list[md.Problem]:
    """Every problem of `op` with a 2-digit operand (a ≥ b for `sub`) whose fact is not in
    `seen`, in sorted order (both orders of a sum are there when neither was seen)."""
    pairs = ((a, b) for a in range(100) for b in range(100) if max(a, b) >= 10)
    return sorted(
        p
        for p in (md.Problem(a, op, b) for a, b in pairs)
        if (op == "add" or p.a >= p.b) and fact(p) not in seen
    )


def make_questions(seen: set[Fact], seed: int = SEED) -> list[Question]:
    """Per op: problems of distinct held-out facts in shuffled order (the first order of a sum
    the shuffle puts forward), styles cycling through `STYLE_ORDER`, each in a template of its
    style drawn uniformly."""
    rng = random.Random(seed)
    out: list[Question] = []
    for op, n in COUNTS.items():
        pool = held_out_pool(op, seen)
        rng.shuffle(pool)
        chosen: dict[Fact, md.Problem] = {}
        for p in pool:
            chosen.setdefault(fact(p), p)
        if len(chosen) < n:
            raise SystemExit(f"only {len(chosen)} held-out {op} facts for {n} items")
        for i, p in enumerate(list(chosen.values())[:n]):
            style = STYLE_ORDER[i % len(STYLE_ORDER)]
            out.append(Question(p, style, rng.randrange(len(STYLES[style][op]))))
    return out


def to_items(questions: Iterable[Question]) -> list[dict[str, Any]]:
    """Suite items in the `suite.jsonl` format; ids `fw-<op>-<digits>d-NNNN` (never a
    `suite.jsonl` id, so one ledger can hold both suites' consumed items)."""
    counters: dict[str, int] = {}
    items = []
    for q in questions:
        p = q.problem
        counters[p.op] = counters.get(p.op, 0) + 1
        items.append(
            {
                "id": f"fw-{p.op}-{p.digits}d-{counters[p.op]:04d}",
                "messages": [{"role": "user", "content": q.prompt}],
                "answer": q.answer,
                "scorer": "numeric",
                "tags": [p.op, f"{p.digits}d", q.style],
            }
        )
    return items


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "flywheel_suite.jsonl")
    args = parser.parse_args(argv)
    items = to_items(make_questions(seen_facts()))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    md.write_items(args.out, items)
    print(f"wrote {len(items)} flywheel suite items to {args.out}")


if __name__ == "__main__":
    main()
