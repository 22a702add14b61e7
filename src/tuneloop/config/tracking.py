"""The `tracking:` section of loop.yaml: mirror each round into an MLflow tracking store.

    tracking:
      mlflow: default                 # sqlite:///<ledger folder>/mlflow.db
      # mlflow: sqlite:////srv/mlflow/mlflow.db | http://mlflow.internal:5000 | file:///data/mlruns
      registered_model: arith-tuner   # default: the loop's name

A model only, a docstring under each field (as `config.models`); the loop's `track` phase
(`tuneloop.loop.track`) unpacks it and `tuneloop check` validates it. The MLflow side lives in
`tuneloop.tracking`. The default store sits beside the gate ledger, not inside the workdir,
for the ledger's reason: every round of a flywheel (each in its own workdir) writes to one
registry, and clearing a workdir never clears it.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from tuneloop.config.base import Section

DEFAULT_STORE = "default"
"""`tracking.mlflow: default`: a SQLite store beside the gate ledger."""


class TrackingConfig(Section):
    mlflow: str | None = None
    """MLflow tracking URI each round is logged to (a run, the merged model as a registered
    model version, aliases `@challenger` and `@champion`); `default` is
    `sqlite:///<ledger folder>/mlflow.db` (MLflow 3's recommended local store, beside the gate
    ledger so that every round shares it); None: no tracking. Needs `pip install
    'tuneloop[mlflow]'`. A failed write never fails the run: it is recorded in
    `track/tracking.json` and retried by the next `tuneloop run`."""
    experiment: str | None = Field(default=None, min_length=1)
    """MLflow experiment name; None: the loop's `name` (a flywheel round's name without its
    `-rNNNN` suffix, so that every round lands in one experiment)."""
    registered_model: str | None = Field(default=None, min_length=1)
    """Registered model the merged checkpoint becomes a version of; None: the experiment's
    name. Serving code that loads `models:/NAME@champion` follows the ledger's champion."""
    log_model: bool = True
    """Copy the merged model folder into the run's artifacts (`model/`) and register that copy;
    False registers nothing and logs only records and metrics."""

    @field_validator("mlflow")
    @classmethod
    def _uri(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.strip()
        if not value:
            raise ValueError("expected a tracking URI or `default`, got an empty string")
        return DEFAULT_STORE if value.lower() in ("default", "local", "sqlite") else value
