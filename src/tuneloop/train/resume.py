"""Resumable checkpoints: where a training stage saves them and how it resumes from them.

Each stage (`sft`, `sft_warmup`, `grpo`, `dpo`) saves under `<out>/checkpoints/<stage>/
checkpoint-<step>/` every `train.checkpoint.every` steps and at its last step, keeping the
newest `train.checkpoint.keep`. transformers' `resume_from_checkpoint` restores the adapter,
the optimizer, the scheduler and the RNG state, and skips the batches already seen, so a
killed run continues where its checkpoint left off; `health.fit` does the resuming, and
`trim_metrics` drops the rows that the killed run logged after that checkpoint, so every step
appears once in metrics.jsonl.

Deliberately, a stage that already finished (GRPO's warm-up, when GRPO itself was killed)
"resumes" from its last checkpoint too: its adapter is loaded and no step runs, which is how
the warm-up's adapter reaches the GRPO stage without training it again.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tuneloop.config.health import CheckpointConfig
from tuneloop.records import read_jsonl, repair_jsonl_tail, write_jsonl

CHECKPOINTS = "checkpoints"
"""Folder under a training run's output where every stage keeps its checkpoints."""

_STEP = re.compile(r"^checkpoint-(\d+)$")


def stage_dir(out_dir: Path, stage: str) -> Path:
    """The TRL `output_dir` of one training stage (its checkpoints go there)."""
    return Path(out_dir) / CHECKPOINTS / stage


def checkpoint_args(c: CheckpointConfig) -> dict[str, Any]:
    """TrainingArguments keywords for `train.checkpoint`."""
    if c.every == 0:
        return {"save_strategy": "no"}
    return {"save_strategy": "steps", "save_steps": c.every, "save_total_limit": c.keep}


def checkpoint_step(path: Path) -> int | None:
    m = _STEP.match(Path(path).name)
    return int(m.group(1)) if m else None


def last_checkpoint(folder: Path) -> Path | None:
    """The newest complete `checkpoint-<step>` in `folder`, or None."""
    if not Path(folder).is_dir():
        return None
    found = [
        (step, p)
        for p in Path(folder).iterdir()
        if (step := checkpoint_step(p)) is not None and (p / "trainer_state.json").is_file()
    ]
    return max(found)[1] if found else None


def kept_checkpoint(folder: Path) -> str:
    """Where the newest checkpoint in `folder` is, in words for an error message."""
    last = last_checkpoint(folder)
    if last is None:
        return "no checkpoint was saved (set train.checkpoint.every to keep one)"
    return f"the newest checkpoint is {last}"


def any_checkpoint(out_dir: Path) -> bool:
    root = Path(out_dir) / CHECKPOINTS
    return root.is_dir() and any(last_checkpoint(d) for d in root.iterdir())


def trim_metrics(path: Path, phase: str, step: int) -> int:
    """Drop the rows of `phase` after `step` and everything logged after them; return how many.

    The rows a killed run appended after its last checkpoint describe steps the resumed run
    trains again.
    """
    if not Path(path).is_file():
        return 0
    repair_jsonl_tail(path)
    rows = read_jsonl(path)
    cut = next(
        (i for i, r in enumerate(rows) if r.get("phase") == phase and r.get("step", 0) > step),
        len(rows),
    )
    if cut < len(rows):
        write_jsonl(path, rows[:cut])
    return len(rows) - cut
