"""Generate the arithmetic suite and training prompts of the embedded default example.

Run: `python examples/arith/make_data.py [--out DIR]` (default: this folder). Writes
`suite.jsonl` (320 items) and `train_prompts.jsonl` (~3000 prompts), byte-identical on every
run: everything is drawn from `random.Random` with fixed seeds, and the files are written in a fixed
key order with `\\n` line ends.

The task: integer addition and subtraction with 1-2 digit operands, asked as a chat user
message, answer the integer as a string. A question is asked either with the operator symbol
("What is 37 + 45?", the `symbolic` tag) or in words ("Add 37 and 45.", "Subtract 12 from 45.",
the `words` tag), as people write them. A problem's digit count (the `1d`/`2d` tag) is that of
its longer operand. Subtraction never goes negative (the larger operand comes first).

The gap the demo loop closes: the embedded model is pretrained on the symbolic phrasing only
(`pretraining_stream`), so it is partly competent at the arithmetic and poor at questions in
words; half the suite, and the training prompts and production traces, use words.

Deliberate choices:
- Disjointness is enforced on the problem `(a, op, b)` whatever its phrasing, which is
  stronger than on the normalized prompt (the prompt is a function of the problem and its
  phrasing). Training prompts and the model's pretraining text (`build_model.py`) exclude every
  suite problem; `normalize_prompt` is the key the tests check it with.
- The 1-digit space is tiny (100 sums, 55 differences), so training prompts take *all* 1-digit
  problems the suite leaves, and the 2-digit cells fill the rest.
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent

OPS = ("add", "sub")
DIGITS = (1, 2)
PHRASINGS = {
    "add": (
        "What is {a} + {b}?",
        "What is {a} plus {b}?",
        "Add {a} and {b}.",
        "What is the sum of {a} and {b}?",
    ),
    "sub": (
        "What is {a} - {b}?",
        "What is {a} minus {b}?",
        "Subtract {b} from {a}.",
        "How much is {a} take away {b}?",
    ),
}
"""Question templates per operation; index 0 is the symbolic one, the rest are in words
("Subtract {b} from {a}" names the operands in the other order)."""

SUITE_SEED = 20260101
TRAIN_SEED = 20260202
SUITE_COUNTS = {
    ("add", 1): 30,
    ("sub", 1): 20,
    ("add", 2): 135,
    ("sub", 2): 135,
}
"""Suite items per (op, digits) cell: 320 in all, alternately symbolic and in words."""
TRAIN_COUNTS = {
    ("add", 1): 10_000,  # capped by what the suite leaves (70)
    ("sub", 1): 10_000,  # capped by what the suite leaves (35)
    ("add", 2): 1_450,
    ("sub", 2): 1_450,
}
"""Training prompts per cell (unique problems; a 1-digit cell holds every problem the suite
leaves), each in a phrasing drawn uniformly from `PHRASINGS`."""


@dataclass(frozen=True, order=True)
class Problem:
    """One arithmetic problem in one phrasing; the prompt and the answer are functions of it."""

    a: int
    op: str
    b: int
    phrasing: int = 0
    """Index into `PHRASINGS[op]`; 0 is the symbolic form."""

    @property
    def digits(self) -> int:
        return len(str(max(self.a, self.b)))

    @property
    def form(self) -> str:
        return "symbolic" if self.phrasing == 0 else "words"

    @property
    def prompt(self) -> str:
        return PHRASINGS[self.op][self.phrasing].format(a=self.a, b=self.b)

    @property
    def answer(self) -> str:
        return str(self.a + self.b if self.op == "add" else self.a - self.b)

    def phrased(self, phrasing: int) -> Problem:
        """The same problem in another phrasing (`phrased(0)` is the disjointness key)."""
        return Problem(self.a, self.op, self.b, phrasing)


def normalize_prompt(text: str) -> str:
    """The disjointness key: lowercase, whitespace collapsed, stripped."""
    return re.sub(r"\s+", " ", text).strip().lower()


def _template_re(template: str) -> re.Pattern[str]:
    pattern = re.escape(template).replace(r"\{a\}", r"(?P<a>\d+)").replace(r"\{b\}", r"(?P<b>\d+)")
    return re.compile(f"^{pattern}$")


_PROMPT_RES = [
    (_template_re(t), op, i) for op, templates in PHRASINGS.items() for i, t in enumerate(templates)
]


def parse_prompt(text: str) -> Problem:
    """Inverse of `Problem.prompt` (used by tests to recompute answers)."""
    for pattern, op, phrasing in _PROMPT_RES:
        m = pattern.match(text)
        if m is not None:
            return Problem(int(m["a"]), op, int(m["b"]), phrasing)
    raise ValueError(f"not an arithmetic prompt: {text!r}")


def _operand(rng: random.Random, digits: int) -> int:
    low = 0 if digits == 1 else 10 ** (digits - 1)
    return rng.randint(low, 10**digits - 1)


def sample_problem(rng: random.Random, op: str, digits: int) -> Problem:
    """One problem whose longer operand has exactly `digits` digits."""
    big = _operand(rng, digits)
    small = _operand(rng, rng.randint(1, digits))
    if op == "sub":
        return Problem(max(big, small), op, min(big, small))
    return Problem(big, op, small) if rng.random() < 0.5 else Problem(small, op, big)


def all_problems(op: str, digits: int) -> list[Problem]:
    """Every problem of a 1-digit cell (only that cell is small enough to enumerate)."""
    assert digits == 1
    pairs = [(a, b) for a in range(10) for b in range(10) if op == "add" or a >= b]
    return [Problem(a, op, b) for a, b in pairs]


def draw_cell(
    rng: random.Random, op: str, digits: int, n: int, exclude: set[Problem]
) -> list[Problem]:
    """`n` distinct problems of a cell, none in `exclude`, in draw order (capped by the pool)."""
    if digits == 1:
        pool = [p for p in all_problems(op, digits) if p not in exclude]
        rng.shuffle(pool)
        return pool[:n]
    out: list[Problem] = []
    seen = set(exclude)
    while len(out) < n:
        p = sample_problem(rng, op, digits)
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


def make_suite(seed: int = SUITE_SEED) -> list[Problem]:
    """Per cell: distinct problems, alternately symbolic and in a random wording."""
    rng = random.Random(seed)
    out: list[Problem] = []
    for (op, digits), n in SUITE_COUNTS.items():
        for i, p in enumerate(draw_cell(rng, op, digits, n, exclude=set())):
            out.append(p.phrased(0 if i % 2 == 0 else rng.randint(1, len(PHRASINGS[op]) - 1)))
    return out


def make_train(suite: Iterable[Problem], seed: int = TRAIN_SEED) -> list[Problem]:
    """Per cell: distinct problems that are not suite problems, each in a random phrasing."""
    rng = random.Random(seed)
    exclude = {p.phrased(0) for p in suite}
    out: list[Problem] = []
    for (op, digits), n in TRAIN_COUNTS.items():
        for p in draw_cell(rng, op, digits, n, exclude=exclude):
            out.append(p.phrased(rng.randrange(len(PHRASINGS[op]))))
    return out


def pretraining_stream(
    n: int,
    seed: int,
    exclude: set[Problem],
    digit_weights: dict[int, float] | None = None,
    worded_fraction: float = 0.0,
) -> Iterator[Problem]:
    """`n` problems drawn with replacement, never one in `exclude` (in any phrasing).

    This is the model's pretraining text (`build_model.py`); it shares the suite's cells but,
    by construction, none of its problems. Cells are weighted by digit count (uniform if
    `digit_weights` is None; the two operations always equally). A problem is asked in words
    with probability `worded_fraction` (the embedded model uses 0: symbolic only). The coin is
    tossed for every problem, so the fraction changes the phrasings and never the problems.
    """
    rng = random.Random(seed)
    exclude = {p.phrased(0) for p in exclude}
    cells = [(op, d) for op in OPS for d in DIGITS]
    weights = [1.0 if digit_weights is None else digit_weights[d] for _, d in cells]
    made = 0
    while made < n:
        op, digits = rng.choices(cells, weights)[0]
        p = sample_problem(rng, op, digits)
        worded = rng.random() < worded_fraction
        if p not in exclude:
            made += 1
            yield p.phrased(rng.randint(1, len(PHRASINGS[op]) - 1)) if worded else p


def to_item(p: Problem, item_id: str) -> dict[str, object]:
    return {
        "id": item_id,
        "messages": [{"role": "user", "content": p.prompt}],
        "answer": p.answer,
        "scorer": "numeric",
        "tags": [p.op, f"{p.digits}d", p.form],
    }


def to_items(problems: list[Problem], prefix: str = "") -> list[dict[str, object]]:
    counters: dict[tuple[str, int], int] = {}
    items = []
    for p in problems:
        key = (p.op, p.digits)
        counters[key] = counters.get(key, 0) + 1
        items.append(to_item(p, f"{prefix}{p.op}-{p.digits}d-{counters[key]:04d}"))
    return items


def problem_of(item: dict[str, object]) -> Problem:
    """The problem behind a suite or training item (from its user message)."""
    messages = item["messages"]
    assert isinstance(messages, list)
    return parse_prompt(str(messages[-1]["content"]))


def read_items(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_items(path: Path, items: list[dict[str, object]]) -> None:
    text = "".join(json.dumps(it) + "\n" for it in items)
    path.write_bytes(text.encode())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="output folder")
    args = parser.parse_args(argv)
    suite = make_suite()
    train = make_train(suite)
    args.out.mkdir(parents=True, exist_ok=True)
    write_items(args.out / "suite.jsonl", to_items(suite))
    write_items(args.out / "train_prompts.jsonl", to_items(train, prefix="train-"))
    print(f"wrote {len(suite)} suite items and {len(train)} training prompts to {args.out}")


if __name__ == "__main__":
    main()
