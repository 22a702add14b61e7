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

A password in the URI (`postgresql://user:pw@host/db`) or a token in its query string is
used to connect and never written or printed: `masked_uri` is the one function that masks
it, applied where the URI enters a record — this section's serializer (so every dump of the
config: `tuneloop check`'s output, the manifest, the archived loop.yaml, report.html), the
tracking record and every message. Keep the password out of the file where the store allows
it (`PGPASSWORD` or `~/.pgpass` for PostgreSQL, `MLFLOW_TRACKING_PASSWORD` /
`MLFLOW_TRACKING_TOKEN` for a tracking server): an archived config holds the masked URI.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import Field, field_serializer, field_validator

from tuneloop.config.base import Section
from tuneloop.envkeys import Redactor

DEFAULT_STORE = "default"
"""`tracking.mlflow: default`: a SQLite store beside the gate ledger."""


def masked_uri(text: str, uri: str | None = None) -> str:
    """`text` (a URI, or a message holding one) with passwords and tokens masked: the userinfo
    password, `?token=`/`password=`-style query values and any API key read in this process
    become `<SECRET>` (`envkeys.Redactor`'s rules). With `uri`, its password is also masked
    wherever it stands alone in `text` (a driver's error message may quote it)."""
    try:
        password = urlsplit(uri).password if uri else None
    except ValueError:  # not a URL at all: nothing of it to mask
        password = None
    return Redactor((password,) if password else ()).text(text)


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

    @field_serializer("mlflow")
    def _masked(self, value: str | None) -> str | None:
        return None if value is None else masked_uri(value)
