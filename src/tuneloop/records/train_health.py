"""How a training run that ended unhealthy was walked back: part of `train_settings.json`.

Written by the train phase (`train/walkback.py`) into `TrainRunRecord.walk_back`; read by the
loop, which hands it to the capstone (report.md and report.html say "walked back to
checkpoint-N (step N of M): why"). Defined here, in core, because the report reads it and a
phase does not import another.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class WalkBack(BaseModel):
    """Which checkpoint became the trained adapter after an unhealthy end, and why."""

    model_config = ConfigDict(extra="forbid")

    stage: str
    """The training stage walked back (the method's own: `grpo`, `sft`, `composite`, …)."""
    checkpoint: str
    """The checkpoint published as the adapter (`checkpoint-<step>`)."""
    step: int
    """Its optimizer step."""
    steps: int
    """The steps the stage was to run (`train.steps`)."""
    ended_step: int
    """The step at which training ended unhealthy."""
    reason: str
    """Why training ended unhealthy: the stop (non-finite value, collapse abort) or the reward
    drop, in words."""
    checks: list[str]
    """The health checks the chosen checkpoint passed, in words (no eval score is among them)."""
    skipped: list[str] = []
    """Each newer checkpoint passed over, with the check it failed."""

    def line(self) -> str:
        """`walked back to checkpoint-N (step N of M): <reason>`."""
        return f"walked back to {self.checkpoint} (step {self.step} of {self.steps}): {self.reason}"
