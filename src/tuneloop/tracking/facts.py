"""What one round hands to MLflow (`RoundFacts`) and what the write did (`TrackingRecord`).

`RoundFacts` is plain data: the loop (`tuneloop.loop.track`) builds it from the round's typed
records (delta report, verdict, promotion, archive, state), so this package reads no other
phase's artifacts and never decides anything — it mirrors decisions the ledger already holds.
`TrackingRecord` is `track/tracking.json`: logged or failed, with the MLflow ids to find the
run and the model version again, and the error when the write failed (then the next
`tuneloop run` retries it).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from tuneloop.records import Record

TRACKING_FILE = "tracking.json"
RUN_TAG = "tuneloop.run_id"
"""The tag that makes a write idempotent: a round's MLflow run and model version carry it."""
CANDIDATE_TAG = "tuneloop.candidate_at"
"""When the candidate was made (ISO-8601); `@challenger` never moves back to an older one."""
CHALLENGER, CHAMPION = "challenger", "champion"

_NAME = re.compile(r"[^A-Za-z0-9_\-. /]")


def metric_name(name: str) -> str:
    """A name MLflow accepts (letters, digits, `_-. /`): anything else becomes `_`."""
    return _NAME.sub("_", name)


@dataclass(frozen=True)
class RoundFacts:
    """One round as MLflow sees it; every value already read from the round's records."""

    run_id: str
    """tuneloop's run id (the MLflow run is found again by the tag `tuneloop.run_id`)."""
    experiment: str
    """MLflow experiment name."""
    registered_model: str
    """Registered model the merged checkpoint becomes a version of."""
    candidate_at: str
    """When the candidate was made (the merge's end), ISO-8601."""
    params: dict[str, str] = field(default_factory=dict)
    """Flattened config essentials and input hashes."""
    metrics: dict[str, float] = field(default_factory=dict)
    """Arm means, Δ, CI, p, the verdict as 0/1, phase timings (finite numbers only)."""
    curves: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    """Per-step series (training loss …): name → [(step, value)]."""
    tags: dict[str, str] = field(default_factory=dict)
    """Run id, round id, verdict, evidence hash, …"""
    artifacts: dict[str, Path] = field(default_factory=dict)
    """Artifact path in the run → file on disk (only files that exist)."""
    model_dir: Path | None = None
    """The merged Hugging Face folder to log and register (None: register nothing)."""
    decision: str | None = None
    """The gate's decision (None: no gate)."""
    champion_run_id: str | None = None
    """The run whose model is the ledger's champion now (None: the bootstrap or none);
    `@champion` is moved to that run's model version when it has one."""

    def finite_metrics(self) -> dict[str, float]:
        return {metric_name(k): v for k, v in self.metrics.items() if math.isfinite(v)}


class TrackingRecord(Record):
    """`track/tracking.json`: what the round's MLflow write did."""

    KIND = "tracking"
    VERSION = 1

    status: Literal["logged", "failed"]
    """logged, or failed (the run went on; the next `tuneloop run` retries the write)."""
    tracking_uri: str
    """The MLflow store written to."""
    experiment: str
    """MLflow experiment name."""
    run_id: str
    """tuneloop's run id."""
    mlflow_run_id: str | None = None
    """The MLflow run (None if the write failed before it existed)."""
    registered_model: str | None = None
    """Registered model name (None: `tracking.log_model` is off)."""
    model_version: int | None = None
    """This round's model version."""
    aliases: list[str] = []
    """The aliases this round's model version holds after the write."""
    champion_version: int | None = None
    """The model version `@champion` points at after the write (None: unset)."""
    ledger_champion_run_id: str | None = None
    """The run of the ledger's champion at this write (when it changes — an approval, a
    later promotion — the next `tuneloop run` of this workdir writes again to move
    `@champion`)."""
    error: str | None = None
    """Why the write failed (exception type and message)."""
    attempts: int = 1
    """Writes tried for this round so far (a failed one is retried by the next run)."""
    at: str
    """ISO-8601 UTC time of this attempt."""
    duration_s: float
    """Seconds the attempt took (MLflow import included)."""
