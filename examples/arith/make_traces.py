"""Generate the synthetic "production log" of the arith example: `traces/production.jsonl`.

Run: `python examples/arith/make_traces.py [--out FILE]`. Byte-identical on every run (one
`random.Random` with a fixed seed; timestamps derived from the line index).

What it imitates: a logging proxy in front of a deployed arithmetic assistant, writing one
OpenAI `{request, response}` pair per line with the user's thumbs as `feedback` or `verdict`.
The questions are drawn from `train_prompts.jsonl` (so they share the suite's distribution
but none of its problems), answered correctly ~88% of the time; users mostly thumb up right
answers and thumb down wrong ones, some never rate. Planted on purpose, for the corpus build
to handle: exact duplicate requests, prompts answered twice with opposite verdicts (preference
pairs), `LEAKS` suite items asked verbatim (decontamination must remove them), a fake API key
and an e-mail address inside user messages (scrubbing must remove them), one truncated line
and one 500 response (rejects).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SEED = 20260303
N_EXCHANGES = 1200
LEAKS = 6
FAKE_KEY = "sk-proj-TUNELOOPfake0000KEY1111notreal2222"
FAKE_EMAIL = "jane.doe@example.com"
T0 = 1_780_000_000  # 2026-05-28, a fixed epoch second


def _items(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _wrong(answer: str, rng: random.Random) -> str:
    value = int(answer) + rng.choice([-10, -2, -1, 1, 2, 10])
    return str(abs(value))


def _exchange(i: int, question: str, answer: str, feedback: Any, style: int) -> dict[str, Any]:
    line: dict[str, Any] = {
        "timestamp": T0 + 37 * i,
        "request": {
            "model": "arith-prod",
            "messages": [{"role": "user", "content": question}],
            "max_tokens": 8,
            "temperature": 0,
        },
        "response": {
            "id": f"chatcmpl-prod-{i:05d}",
            "object": "chat.completion",
            "created": T0 + 37 * i + 1,
            "model": "arith-prod-v0",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": answer},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 12, "completion_tokens": 2, "total_tokens": 14},
        },
    }
    if feedback is not None:
        # Two feedback shapes, as two client versions would log them.
        if style == 0:
            line["feedback"] = {"thumbs": feedback}
        else:
            line["verdict"] = feedback
    return line


def _feedback(correct: bool, rng: random.Random) -> str | None:
    roll = rng.random()
    if roll < 0.15:
        return None  # never rated
    if correct:
        return "up" if roll < 0.97 else "down"
    return "down" if roll < 0.9 else "up"


def make_lines(suite: list[dict[str, Any]], train: list[dict[str, Any]]) -> list[str]:
    rng = random.Random(SEED)
    pool = rng.sample(train, k=N_EXCHANGES)
    lines: list[str] = []
    for i, item in enumerate(pool):
        question, answer = item["messages"][-1]["content"], item["answer"]
        correct = rng.random() < 0.88
        reply = answer if correct else _wrong(answer, rng)
        if i % 97 == 5:
            question = f"My OpenAI key is {FAKE_KEY}, ignore that. {question}"
        elif i % 89 == 7:
            question = f"(from {FAKE_EMAIL}) {question}"
        if rng.random() < 0.04:  # answered twice, right (up) and wrong (down): a preference pair
            lines.append(json.dumps(_exchange(i, question, answer, "up", 0)))
            lines.append(
                json.dumps(_exchange(2 * N_EXCHANGES + i, question, _wrong(answer, rng), "down", 1))
            )
            continue
        lines.append(json.dumps(_exchange(i, question, reply, _feedback(correct, rng), i % 2)))
        if rng.random() < 0.06:  # the user asked again: an exact duplicate request
            lines.append(
                json.dumps(_exchange(N_EXCHANGES + i, question, reply, _feedback(correct, rng), 0))
            )
    for j, item in enumerate(rng.sample(suite, k=LEAKS)):  # planted contamination
        q, a = item["messages"][-1]["content"], item["answer"]
        lines.insert(
            rng.randrange(len(lines)), json.dumps(_exchange(3 * N_EXCHANGES + j, q, a, "up", 1))
        )
    lines.insert(rng.randrange(len(lines)), lines[10][: len(lines[10]) // 2])  # torn line
    bad = _exchange(4 * N_EXCHANGES, "What is 1 + 1?", "2", None, 0)
    bad["response"] = {"status_code": 500, "body": {"error": {"message": "upstream timeout"}}}
    lines.insert(rng.randrange(len(lines)), json.dumps(bad))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "traces" / "production.jsonl")
    args = parser.parse_args()
    lines = make_lines(_items(HERE / "suite.jsonl"), _items(HERE / "train_prompts.jsonl"))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(line + "\n" for line in lines), encoding="utf-8", newline="\n")
    print(f"wrote {len(lines)} lines to {args.out}")


if __name__ == "__main__":
    main()
