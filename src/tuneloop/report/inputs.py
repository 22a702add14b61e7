"""What the capstone pages read: where the round's artifacts are, and what they show of a verdict.

`CapstoneInputs` is handed over by the loop (`loop/handover.py`) already unpacked; the gate
verdict reaches the pages through the read-only `VerdictView` protocol rather than its class,
so that this phase imports neither the loop nor the gate. `report.md` (`capstone.py`) and
`report.html` (`page.py`, `html.py`) both take them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from tuneloop.records.train_health import WalkBack


@dataclass(frozen=True)
class CascadeInputs:
    """A cascade round's artifacts (`serve.challenger: cascade`)."""

    composition: Path
    """The compose phase's `composition.json` (`records.composition.CompositionRecord`)."""
    frontier: Path
    """Its `frontier.svg`, drawn by the compose phase."""
    pre_log: Path
    """The champion's sample-log folder (eval_pre): its rows' `cost_usd`."""
    post_log: Path
    """The cascade's sample-log folder (eval_post): its rows' cascade traces and `cost_usd`."""


@dataclass(frozen=True)
class CapstoneInputs:
    """Where the capstone's artifacts are, and the hashes the runner already recorded."""

    pre_summary: Path
    """The pre-training eval's `summary.json`."""
    delta: Path
    """The delta report (`delta.json`); its folder holds the figures."""
    train_data: Path
    """The training data the round used."""
    train_data_sha256: str | None
    """Its sha256 as recorded for the train phase (None: not recorded)."""
    base_model_sha256: str | None
    """The base model's sha256 as recorded for the first eval (None: not recorded)."""
    corpus_provenance: Path
    """The corpus build's `provenance.json`; listed when it exists."""
    train_settings: Path
    """The adapter's resolved `train_settings.json`; listed when it exists."""
    this_phase: str = "capstone"
    """This phase's name in the run state (its row reads "writing this report")."""
    replay_report: Path | None = None
    """The replay phase's `report.json` when the round replayed traces to teachers."""
    replay_report_sha256: str | None = None
    """Its sha256 as the runner recorded the replay phase's outputs."""
    walk_back: WalkBack | None = None
    """When training ended unhealthy: the checkpoint published instead, and why (from
    `train_settings.json`)."""
    steps: tuple[Path, Path] | None = None
    """When the round evaluated its SFT warm-up alone (`loop.warmup`): the `delta.json` of
    base → warm-up and of warm-up → trained model, on the report items."""
    trained: tuple[int | None, float | None, str | None] | None = None
    """What training did (from `train_settings.json`): the method's steps done, its seconds
    from the first optimizer step, and what stopped it (`steps`, `max_seconds`, …)."""
    portfolio: Path | None = None
    """A portfolio round's `challengers/selection.json` (`records.selection.PortfolioRecord`:
    every challenger, the selection rule and its choice); None when the round had none."""
    cascade: CascadeInputs | None = None
    """A cascade round's composition, frontier and arms' logs; None for any other round."""


class _Arm(Protocol):
    @property
    def mean(self) -> float | None: ...


class _Condition(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def passed(self) -> bool: ...
    @property
    def detail(self) -> str: ...


class _JudgeNote(Protocol):
    def sentence(self) -> str: ...


class VerdictView(Protocol):
    """What the capstone shows of a gate verdict (`gate/verdict.json`, read typed)."""

    @property
    def decision(self) -> str: ...
    @property
    def slice(self) -> str: ...
    @property
    def champion(self) -> _Arm: ...
    @property
    def challenger(self) -> _Arm: ...
    @property
    def bar(self) -> Mapping[str, Any]: ...
    @property
    def conditions(self) -> Sequence[_Condition]: ...
    @property
    def sealed_at(self) -> str | None: ...
    @property
    def evidence_sha256(self) -> str | None: ...
    @property
    def item_ids(self) -> Sequence[str]: ...
    @property
    def warnings(self) -> Sequence[str]: ...
    @property
    def judge(self) -> _JudgeNote | None: ...
