"""The `replay:` section of loop.yaml: which traces go to which teachers, and how many steps.

    replay:
      teachers: teachers.yaml     # the teachers file (tuneloop.replay.teachers)
      traces: traces.jsonl        # canonical traces (`tuneloop ingest`)
      sample_fraction: 0.25       # a seeded subset of the assistant steps
      max_steps: 500
      judge: exact                # scores steps that carry no verifier
    # or the LLM judge: open-ended steps graded, or compared with the trace's own answer
    #   judge: judge
    #   judge_args: {judge: judges/agent.yaml}

A model only, a docstring under each field (as `config.models`); `tuneloop replay` takes its
options from it and `tuneloop check` validates the teachers file it names, all problems at
once. The teachers file itself is the replay phase's (`tuneloop.replay.teachers`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, ValidationInfo, field_validator

from tuneloop.config.base import ConfigPath, Section


class ReplayConfig(Section):
    teachers: ConfigPath | None = None
    """The teachers file (YAML: name, endpoint or embedded model, model id, API key env var,
    price per 1M tokens, sampling); None: no replay."""
    traces: ConfigPath | None = None
    """Traces whose assistant steps are replayed: canonical traces JSONL (`tuneloop ingest`
    writes it), or — with `traces_format` — an application's own files or session folders."""
    traces_format: str = "trace"
    """`trace`: `traces` is canonical `tuneloop.trace/1` JSONL; an ingester name (codex_cli,
    cline, claude_code, …) or `auto`: the loop ingests `traces` (scrubbed) into the replay
    folder first."""
    sample_fraction: float = Field(default=1.0, gt=0, le=1)
    """Fraction of the assistant steps replayed, drawn by a hash of (seed, trace, step), so a
    step stays in or out however the traces file grows."""
    max_steps: int | None = Field(default=None, gt=0)
    """Most steps replayed (the sampled steps with the smallest hashes); None: all sampled."""
    seed: int = 0
    """Seed of the step sample and of the per-request seeds sent to teachers."""
    default_scorer: str = "exact"
    """Scorer for a step's verifier that names none (a trace `reference` without `scorer`)."""
    judge: str | None = None
    """Registered scorer for steps without a verifier, given the prefix as `messages` and the
    original response as `answer`; `judge` is the LLM judge (grade mode: no reference;
    pairwise: the original is the baseline; `tuneloop.replay.judging`). None leaves such
    steps unscored (no rows from them)."""
    judge_args: dict[str, Any] = {}
    """`scorer_args` handed to the judge with each step; for `judge: judge`, `judge` names the
    judge file (relative to this file's folder)."""
    pass_threshold: float = Field(default=1.0, ge=0, le=1)
    """A response passes when its score is at least this. A pairwise judge scores 1 a win
    over the original, 0.5 a tie, 0 a loss: the default passes only a win."""
    concurrency: int = Field(default=8, gt=0)
    """Teacher requests in flight at once, over all teachers."""
    include_sidechains: bool = False
    """Also replay sub-agent traces (`metadata.sidechain`); by default only main threads."""

    @field_validator("judge_args")
    @classmethod
    def _judge_file(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        """The LLM judge's file resolves against the YAML file's folder, as a `ConfigPath`."""
        path, base = value.get("judge"), (info.context or {}).get("base_dir")
        if info.data.get("judge") != "judge" or not isinstance(path, str) or base is None:
            return value
        return {**value, "judge": str((Path(base) / Path(path).expanduser()).resolve())}
