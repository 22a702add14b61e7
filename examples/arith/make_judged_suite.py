"""Write judged_suite.jsonl: the arithmetic suite as open-ended items scored by an LLM judge.

    python examples/arith/make_judged_suite.py

Every item of suite.jsonl, with the same id (so the same slices by id hash), scored `judge`
and without its `answer`: nothing in the item says what is right, as with a support reply or
a summary. The judge (examples/arith/judge/) works out whether an answer is right from the
question alone. Deterministic; the output is committed.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).parent


def judged(item: dict) -> dict:
    """The item without its reference, scored by the judge."""
    return {k: v for k, v in item.items() if k != "answer"} | {"scorer": "judge"}


def main() -> None:
    rows = [json.loads(line) for line in (HERE / "suite.jsonl").read_text().splitlines()]
    text = "".join(json.dumps(judged(r)) + "\n" for r in rows)
    (HERE / "judged_suite.jsonl").write_text(text)
    print(f"wrote {len(rows)} judged items to {HERE / 'judged_suite.jsonl'}")


if __name__ == "__main__":
    main()
