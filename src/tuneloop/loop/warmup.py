"""What each training step added: the SFT warm-up alone, then the method after it.

A GRPO or composite run that warms up with SFT (`train.sft_warmup_steps`, LoRA) keeps the
warm-up's own adapter (`train/adapter/warmup/`). The `eval_warmup` phase serves it merged on the
base, under the same serve and eval settings as the two arms, and the report phase compares
base → warm-up and warm-up → trained model on the report items (never the gate slice: the gate
judges only the trained model), beside the round's own delta: `report/warmup/delta.json` and
`report/after_warmup/delta.json`. So a recipe that needs a warm start shows both steps'
contribution in its own round, with the same paired statistics as the round's Δ.

The merged warm-up model exists only while it is evaluated (the adapter is the artifact; a
merged copy would double a real model's disk): the sample log's `served_as` names its hash.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from tuneloop.config import LoopConfig

WARMUP_STEP, AFTER_WARMUP = "warmup", "after_warmup"
"""The report phase's sub-folders: base → warm-up, and warm-up → the trained model."""


def evaluates_warmup(cfg: LoopConfig) -> bool:
    """Is there a warm-up of its own to evaluate (GRPO or composite, LoRA, SFT warm-up steps,
    local weights, a trained challenger)?"""
    t = cfg.train
    return (
        t.method in ("grpo", "composite")
        and t.sft_warmup_steps > 0
        and t.adapter == "lora"
        and not cfg.merge.zero_adapter
        and cfg.serve.backend != "external"
        and cfg.portfolio is None  # the selected challenger's recipe is not `train:`'s
    )


class StepReports(NamedTuple):
    """The two comparisons the report phase wrote (their `delta.json`)."""

    warmup: Path
    after_warmup: Path


def step_reports(report_folder: Path) -> StepReports | None:
    """The round's per-step comparisons, when its report phase wrote them."""
    found = StepReports(
        report_folder / WARMUP_STEP / "delta.json", report_folder / AFTER_WARMUP / "delta.json"
    )
    return found if all(p.is_file() for p in found) else None
