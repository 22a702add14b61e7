"""Generate the replay demo's production log: `traces/replay_production.jsonl`.

Run: `python examples/arith/make_replay_traces.py [--out FILE] [-n N]`. Byte-identical on
every run (one `random.Random` with a fixed seed; timestamps from the line index).

What it imitates: the log of a deployed arithmetic assistant whose users ask as the main
demo's training data does (make_data.py): three questions in four in words (additions and
subtractions, alternating), one in four symbolic ("What is 37 + 45?"). The logged answers are
the base model's kind: right on 30% of the questions in words and 90% of the symbolic ones.
Every line carries the task's verifiable `answer` and its `scorer`, as a task queue with known
results would log it. The questions are the *replay half* of `train_prompts.jsonl`
(`build_teachers.teacher_half` is false): none is a suite problem, and no teacher was trained
on them (the teachers saw only questions in words of the other half). 1,200 lines by default:
900 in words, 300 symbolic (the replay half has 1,153 and 396). `loop_replay.yaml`'s data
phase ingests the log into canonical traces (and GRPO prompts); its replay phase sends every
step to the teachers in `teachers.yaml`.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

from build_teachers import HERE, read_items, teacher_half, words

SEED = 20261201
N = 1200
SYMBOLIC_EVERY = 4
"""Every 4th line is symbolic, the rest in words: make_data.py's mix (a quarter symbolic)."""
RIGHT = {"words": 0.3, "symbolic": 0.9}
"""How often the logged (original) answer is right: the base model is poor at words only."""
T0 = 1_780_000_000


def exchange(i: int, item: dict[str, Any], said: str) -> dict[str, Any]:
    return {
        "timestamp": T0 + 41 * i,
        "request": {"model": "arith-prod", "messages": item["messages"], "max_tokens": 8},
        "response": {
            "id": f"chatcmpl-replay-{i:05d}",
            "object": "chat.completion",
            "model": "arith-prod-v0",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": said},
                    "finish_reason": "stop",
                }
            ],
        },
        "answer": item["answer"],
        "scorer": "numeric",
    }


def lines(n: int) -> list[dict[str, Any]]:
    items = read_items(HERE / "train_prompts.jsonl")
    add, sub = words(items, "add", teachers=False), words(items, "sub", teachers=False)
    sym = [it for it in items if "symbolic" in it["tags"] and not teacher_half(it["id"])]
    rng = random.Random(SEED)
    for pool in (add, sub, sym):
        rng.shuffle(pool)
    worded = iter([it for pair in zip(add, sub, strict=False) for it in pair])
    symbolic = iter(sym)
    out = []
    for i in range(n):
        kind = "symbolic" if i % SYMBOLIC_EVERY == SYMBOLIC_EVERY - 1 else "words"
        item = next(symbolic if kind == "symbolic" else worded, None)
        if item is None:
            raise SystemExit(f"-n {n}: the replay half has too few {kind} questions")
        right = rng.random() < RIGHT[kind]
        said = item["answer"] if right else str(int(item["answer"]) + rng.choice([-10, -1, 1, 10]))
        out.append(exchange(i, item, said))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "traces" / "replay_production.jsonl")
    parser.add_argument("-n", type=int, default=N)
    args = parser.parse_args()
    rows = lines(args.n)
    args.out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"{len(rows)} exchanges → {args.out}")


if __name__ == "__main__":
    main()
