"""Build the cascade demo's `large` tier: the base trained longer on every kind of question.

Run: `python examples/arith/build_large.py [--steps N] [--out DIR]`. Writes `large/` (a
merged, standalone checkpoint) and `large/build_info.json` (settings, seconds, its greedy
pass@1 and the base's on the suite). About 3-4 CPU-minutes.

Every model here has the base's shape (1M parameters): "large" is what the cascade demo
(`loop_cascade.yaml`) *prices* as a large hosted model ($4 per million completion tokens
against the small tier's $0.2) and what it is measured to be — more accurate than the base
and than a round's short training — not its size. The tier is the base after a LoRA SFT on
all of `train_prompts.jsonl` (none is a suite problem in any wording), through tuneloop's own
`train` and `merge` (`build_teachers.build_one`), for more steps than a demo round trains.

Determinism: fixed seeds, one torch thread, the data in file order; two builds on one machine
and torch build give the same weights (as `build_model.py` and `build_teachers.py`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from build_teachers import build_one, probe, read_items  # noqa: E402

STEPS = 600
LEARNING_RATE = 0.002


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--lr", type=float, default=LEARNING_RATE)
    parser.add_argument("--out", type=Path, default=HERE / "large")
    args = parser.parse_args()
    items = read_items(HERE / "train_prompts.jsonl")
    t0 = time.perf_counter()
    seconds = build_one("large", items, args.out, args.steps, args.lr)
    suite = read_items(HERE / "suite.jsonl")
    info = {
        "steps": args.steps,
        "learning_rate": args.lr,
        "trained_on": f"every train prompt ({len(items)} items)",
        "train_seconds": round(seconds, 1),
        "suite_pass_at_1": probe(args.out, suite),
        "base_suite_pass_at_1": probe(HERE / "model", suite),
        "build_seconds": round(time.perf_counter() - t0, 1),
    }
    import torch

    info["torch"] = torch.__version__
    (args.out / "build_info.json").write_text(json.dumps(info, indent=2) + "\n")
    print(json.dumps(info, indent=2))


if __name__ == "__main__":
    main()
