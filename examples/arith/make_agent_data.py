"""Generate the agent demo's data: a calculator tool-use suite and tool-use trajectories.

Run: `python examples/arith/make_agent_data.py [--out DIR]` (default: this folder). Writes
`agent_suite.jsonl` (300 items) and `agent_train.jsonl` (2,000 trajectories), byte-identical on
every run: problems come from `random.Random` with fixed seeds, the calculator's results from
the registered `calculator` tool itself, and the files are written in a fixed key order with
`\\n` line ends.

The task: addition and subtraction of two 3-digit numbers (100-999), asked in the
phrasings of `make_data.py` (alternately symbolic and in words in the suite), with the
`calculator` tool offered. The embedded model was pretrained on 1-2 digit problems only, so it
cannot do these in its head; it has never seen a tool either. A trajectory is what a model
that uses the tool well writes: one call with the problem as an expression (`"347 + 589"`, the
operands in the problem's order whatever the phrasing), the tool's result, and that result as
the final answer. SFT trains on the two assistant turns only (never on the tool result).

Deliberate choices:
- Disjoint on the problem `(a, op, b)`, whatever its phrasing, as in `make_data.py`.
- Suite items name the expected tool (`expected_tools`), so `tool_match` can score them too.
- Call ids are fixed (`call_1`), not random, so the file is deterministic.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from make_data import PHRASINGS, Problem, read_items, write_items

from tuneloop.envs.calculator import calculator

HERE = Path(__file__).resolve().parent
SUITE_SEED = 20261201
TRAIN_SEED = 20261202
SUITE_COUNTS = {"add": 150, "sub": 150}
"""Suite items per operation (all 3-digit), alternately symbolic and in words."""
TRAIN_COUNTS = {"add": 1000, "sub": 1000}
"""Training trajectories per operation, each in a phrasing drawn uniformly from `PHRASINGS`."""
TOOLS = ["calculator"]
SYMBOL = {"add": "+", "sub": "-"}


def expression(p: Problem) -> str:
    """The calculator expression for a problem, operands in the problem's order."""
    return f"{p.a} {SYMBOL[p.op]} {p.b}"


def draw(rng: random.Random, op: str, n: int, exclude: set[Problem]) -> list[Problem]:
    """`n` distinct problems with two 3-digit operands, none in `exclude`, in draw order
    (subtraction never goes negative: the larger operand comes first)."""
    out: list[Problem] = []
    seen = set(exclude)
    while len(out) < n:
        a, b = rng.randint(100, 999), rng.randint(100, 999)
        p = Problem(max(a, b), op, min(a, b)) if op == "sub" else Problem(a, op, b)
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


def make_suite(seed: int = SUITE_SEED) -> list[Problem]:
    rng = random.Random(seed)
    out: list[Problem] = []
    for op, n in SUITE_COUNTS.items():
        for i, p in enumerate(draw(rng, op, n, exclude=set())):
            out.append(p.phrased(0 if i % 2 == 0 else rng.randint(1, len(PHRASINGS[op]) - 1)))
    return out


def make_train(suite: list[Problem], seed: int = TRAIN_SEED) -> list[Problem]:
    rng = random.Random(seed)
    exclude = {p.phrased(0) for p in suite}
    out: list[Problem] = []
    for op, n in TRAIN_COUNTS.items():
        for p in draw(rng, op, n, exclude=exclude):
            out.append(p.phrased(rng.randrange(len(PHRASINGS[op]))))
    return out


def suite_item(p: Problem, item_id: str) -> dict[str, object]:
    return {
        "id": item_id,
        "messages": [{"role": "user", "content": p.prompt}],
        "tools": TOOLS,
        "answer": p.answer,
        "scorer": "agent_answer",
        "expected_tools": [{"name": "calculator"}],
        "tags": [p.op, f"{p.digits}d", p.form],
    }


def trajectory(p: Problem, item_id: str) -> dict[str, object]:
    """The chat of a model that calls the calculator once and answers with its result."""
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "calculator", "arguments": json.dumps({"expression": expression(p)})},
    }
    result = calculator(expression(p))
    assert result == p.answer, (p, result)
    return {
        "id": item_id,
        "messages": [
            {"role": "user", "content": p.prompt},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": result},
            {"role": "assistant", "content": result},
        ],
        "tools": TOOLS,
        "tags": [p.op, f"{p.digits}d", p.form],
    }


def numbered(problems: list[Problem], prefix: str) -> list[tuple[Problem, str]]:
    counters: dict[str, int] = {}
    out = []
    for p in problems:
        counters[p.op] = counters.get(p.op, 0) + 1
        out.append((p, f"{prefix}{p.op}-{p.digits}d-{counters[p.op]:04d}"))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="output folder")
    args = parser.parse_args(argv)
    suite = make_suite()
    train = make_train(suite)
    args.out.mkdir(parents=True, exist_ok=True)
    write_items(args.out / "agent_suite.jsonl", [suite_item(*x) for x in numbered(suite, "tool-")])
    write_items(args.out / "agent_train.jsonl", [trajectory(*x) for x in numbered(train, "traj-")])
    print(f"wrote {len(suite)} agent suite items and {len(train)} trajectories to {args.out}")


__all__ = ["main", "make_suite", "make_train", "read_items", "suite_item", "trajectory"]

if __name__ == "__main__":
    main()
