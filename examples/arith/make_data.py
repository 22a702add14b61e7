"""Generate the arithmetic suite and training prompts of the embedded default example.

Run: `python examples/arith/make_data.py [--out DIR]` (default: this folder). Writes
`suite.jsonl` (320 items) and `train_prompts.jsonl` (~3000 prompts), byte-identical on every
run: everything is drawn from `random.Random` with fixed seeds, and the files are written in a fixed
key order with `\\n` line ends.

The task: integer addition and subtraction with 1-3 digit operands, asked as a chat user
message ("What is 37 + 45?"), answer the integer as a string. A problem's digit count (the
`1d`/`2d`/`3d` tag) is that of its longer operand; the other operand has 1..k digits.
Subtraction never goes negative (the larger operand comes first) to keep the task learnable
by a ~2 M-parameter model in a few CPU minutes.

Deliberate choices:
- Disjointness is enforced on the problem `(a, op, b)`, which is stronger than on the
  normalized prompt (the prompt is a function of the problem). Training prompts and the model's
  pretraining text (`build_model.py`) exclude every suite problem; `normalize_prompt` is the
  key the tests check it with.
- The 1-digit space is tiny (100 sums, 55 differences), so training prompts take *all* 1-digit
  problems the suite leaves, and the 2/3-digit cells fill the rest.
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
DIGITS = (1, 2, 3)
SYMBOL = {"add": "+", "sub": "-"}

SUITE_SEED = 20260101
TRAIN_SEED = 20260202
SUITE_COUNTS = {
    ("add", 1): 30,
    ("sub", 1): 20,
    ("add", 2): 65,
    ("sub", 2): 65,
    ("add", 3): 70,
    ("sub", 3): 70,
}
"""Suite items per (op, digits) cell: 320 in all."""
TRAIN_COUNTS = {
    ("add", 1): 10_000,  # capped by what the suite leaves (70)
    ("sub", 1): 10_000,  # capped by what the suite leaves (35)
    ("add", 2): 725,
    ("sub", 2): 725,
    ("add", 3): 720,
    ("sub", 3): 720,
}
"""Training prompts per cell (unique; a 1-digit cell holds every problem the suite leaves)."""


@dataclass(frozen=True, order=True)
class Problem:
    """One arithmetic problem; the prompt and the answer are functions of it."""

    a: int
    op: str
    b: int

    @property
    def digits(self) -> int:
        return len(str(max(self.a, self.b)))

    @property
    def prompt(self) -> str:
        return f"What is {self.a} {SYMBOL[self.op]} {self.b}?"

    @property
    def answer(self) -> str:
        return str(self.a + self.b if self.op == "add" else self.a - self.b)


def normalize_prompt(text: str) -> str:
    """The disjointness key: lowercase, whitespace collapsed, stripped."""
    return re.sub(r"\s+", " ", text).strip().lower()


_PROMPT_RE = re.compile(r"^What is (\d+) ([+-]) (\d+)\?$")


def parse_prompt(text: str) -> Problem:
    """Inverse of `Problem.prompt` (used by tests to recompute answers)."""
    m = _PROMPT_RE.match(text)
    if m is None:
        raise ValueError(f"not an arithmetic prompt: {text!r}")
    return Problem(int(m[1]), "add" if m[2] == "+" else "sub", int(m[3]))


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
    rng = random.Random(seed)
    out: list[Problem] = []
    for (op, digits), n in SUITE_COUNTS.items():
        out += draw_cell(rng, op, digits, n, exclude=set())
    return out


def make_train(suite: Iterable[Problem], seed: int = TRAIN_SEED) -> list[Problem]:
    rng = random.Random(seed)
    exclude = set(suite)
    out: list[Problem] = []
    for (op, digits), n in TRAIN_COUNTS.items():
        out += draw_cell(rng, op, digits, n, exclude=exclude)
    return out


def pretraining_stream(
    n: int, seed: int, exclude: set[Problem], digit_weights: dict[int, float] | None = None
) -> Iterator[Problem]:
    """`n` problems drawn with replacement, never one in `exclude`.

    This is the model's pretraining text (`build_model.py`); it shares the suite's cells but,
    by construction, none of its problems. Cells are weighted by digit count (uniform if
    `digit_weights` is None; the two operations always equally).
    """
    rng = random.Random(seed)
    cells = [(op, d) for op in OPS for d in DIGITS]
    weights = [1.0 if digit_weights is None else digit_weights[d] for _, d in cells]
    made = 0
    while made < n:
        op, digits = rng.choices(cells, weights)[0]
        p = sample_problem(rng, op, digits)
        if p not in exclude:
            made += 1
            yield p


def to_item(p: Problem, item_id: str) -> dict[str, object]:
    return {
        "id": item_id,
        "messages": [{"role": "user", "content": p.prompt}],
        "answer": p.answer,
        "scorer": "numeric",
        "tags": [p.op, f"{p.digits}d"],
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
