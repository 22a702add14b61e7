"""MLflow interop (`pip install 'tuneloop[mlflow]'`): each round mirrored into an MLflow store.

    tracking: {mlflow: default}          # in loop.yaml; the loop's `track` phase does the rest

The loop's last phase (`tuneloop.loop.track`) reads the round's typed records into
`RoundFacts` and calls `log_round`, which writes one MLflow run (params, metrics, tags,
records and report as artifacts), registers the merged model as a model version, and places
`@challenger` (the newest candidate) and `@champion` (the ledger's champion), so serving code
that loads `models:/NAME@champion` follows tuneloop's decisions. The ledger stays the source
of truth: a failed write returns a `failed` `TrackingRecord` and is retried by the next run.
Importing this package does not import MLflow (about 2 s); `log_round` does.
"""

from tuneloop.tracking.facts import (
    CANDIDATE_TAG,
    CHALLENGER,
    CHAMPION,
    RUN_TAG,
    TRACKING_FILE,
    RoundFacts,
    TrackingRecord,
    metric_name,
)
from tuneloop.tracking.mlflow_run import import_mlflow, log_round
from tuneloop.tracking.uri import EXTRA, artifact_location, check_uri, require_mlflow, resolve_uri

__all__ = [
    "CANDIDATE_TAG",
    "CHALLENGER",
    "CHAMPION",
    "EXTRA",
    "RUN_TAG",
    "TRACKING_FILE",
    "RoundFacts",
    "TrackingRecord",
    "artifact_location",
    "check_uri",
    "import_mlflow",
    "log_round",
    "metric_name",
    "require_mlflow",
    "resolve_uri",
]
