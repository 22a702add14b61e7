"""Build the replay demo's teachers: two tiny models with different skills, from the base.

Run: `python examples/arith/build_teachers.py [--steps N] [--out DIR]`. Writes
`teachers/adder/` and `teachers/subber/` (merged, standalone checkpoints served by the
embedded backend; `teachers.yaml` names them) and `teachers/build_info.json` (settings,
seconds, each teacher's measured pass@1 per question kind). About 2-3 CPU-minutes.

Each teacher is the base model (`model/`, good at "What is 37 + 45?", poor at questions in
words) after a LoRA SFT round, through tuneloop's own `train` and `merge`, on one kind of
question in words only: the `adder` on additions ("What is 7 plus 8?", "the sum of …"), the
`subber` on subtractions ("Subtract 12 from 45.", "… take away …"). So each is strong where
the other is weak, and a replay that keeps the best passing answer per step beats either.

The questions come from `train_prompts.jsonl` (none is a suite problem in any wording), from
its *teacher half*: the items whose id hashes even (`teacher_half`). The other half is what
`make_replay_traces.py` turns into the replayed production log, so that a teacher answers
questions it has not been trained on.

Determinism: fixed seeds, one torch thread (`train.torch_threads: 1`), the data in file
order; two builds on one machine and torch build give the same weights (as `build_model.py`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TEACHERS = {"adder": "add", "subber": "sub"}
"""Teacher name → the operation (tag) of the questions in words it is trained on."""
STEPS = 100
LEARNING_RATE = 0.003
BATCH = 64
SEED = 0
PROBE = 48
"""Items per question kind measured into build_info.json (from the replay half)."""


def teacher_half(item_id: str) -> bool:
    """Whether a train prompt belongs to the teachers (else to the replayed traces)."""
    return hashlib.sha256(item_id.encode()).digest()[0] % 2 == 0


def read_items(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def words(items: list[dict[str, Any]], op: str, *, teachers: bool) -> list[dict[str, Any]]:
    """Questions in words of one operation, from one half of the train prompts."""
    return [
        it
        for it in items
        if op in it["tags"] and "words" in it["tags"] and teacher_half(it["id"]) == teachers
    ]


def build_one(name: str, items: list[dict[str, Any]], out: Path, steps: int, lr: float) -> float:
    """SFT the base on `items`, merge into `out`; returns the training seconds."""
    from tuneloop.config import LoraConfig, TrainConfig
    from tuneloop.train.checkpoint import merge
    from tuneloop.train.run import train

    settings = TrainConfig(
        method="sft",
        steps=steps,
        learning_rate=lr,
        batch_size=BATCH,
        seed=SEED,
        torch_threads=1,
        lora=LoraConfig(r=64, alpha=64),
    )
    with tempfile.TemporaryDirectory(prefix=f"teacher-{name}-") as tmp:
        data = Path(tmp) / "data.jsonl"
        rows = [{"messages": it["messages"], "answer": it["answer"]} for it in items]
        data.write_text("".join(json.dumps(r) + "\n" for r in rows))
        t0 = time.perf_counter()
        adapter = train(
            HERE / "model",
            data,
            Path(tmp) / "adapter",
            settings,
            suite_paths=[HERE / "suite.jsonl"],
            progress=False,
        )
        seconds = time.perf_counter() - t0
        merged = Path(tmp) / "merged"
        merge(HERE / "model", adapter, merged)
        # lineage.json names this run's temporary folders; the build info says what it was
        (merged / "lineage.json").unlink()
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(merged, out)
    return seconds


def probe(model_dir: Path, items: list[dict[str, Any]]) -> float:
    """Greedy pass@1 of a model on items (examples/arith/measure.py's measurement)."""
    sys.path.insert(0, str(HERE))
    from measure import measure

    acc, _ = measure(model_dir, items)
    return round(acc["all"], 4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--lr", type=float, default=LEARNING_RATE)
    parser.add_argument("--only", choices=sorted(TEACHERS))
    parser.add_argument("--out", type=Path, default=HERE / "teachers")
    args = parser.parse_args()
    items = read_items(HERE / "train_prompts.jsonl")
    info: dict[str, Any] = {
        "steps": args.steps,
        "learning_rate": args.lr,
        "batch_size": BATCH,
        "seed": SEED,
        "lora": {"r": 64, "alpha": 64},
        "torch_threads": 1,
        "teachers": {},
    }
    probes = {op: words(items, op, teachers=False)[:PROBE] for op in ("add", "sub")}
    t0 = time.perf_counter()
    for name, op in TEACHERS.items():
        if args.only and name != args.only:
            continue
        train_items = words(items, op, teachers=True)
        seconds = build_one(name, train_items, args.out / name, args.steps, args.lr)
        info["teachers"][name] = {
            "trained_on": f"{op} questions in words, teacher half ({len(train_items)} items)",
            "train_seconds": round(seconds, 1),
            "pass_at_1": {f"{op}/words": probe(args.out / name, probes[op]) for op in probes},
        }
        print(name, json.dumps(info["teachers"][name]), flush=True)
    info["base_pass_at_1"] = {f"{op}/words": probe(HERE / "model", probes[op]) for op in probes}
    info["probe_items_per_kind"] = PROBE
    info["build_seconds"] = round(time.perf_counter() - t0, 1)
    import torch

    info["torch"] = torch.__version__
    (args.out / "build_info.json").write_text(json.dumps(info, indent=2) + "\n")
    print(json.dumps(info, indent=2))


if __name__ == "__main__":
    main()
