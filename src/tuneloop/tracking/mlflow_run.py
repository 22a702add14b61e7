"""Mirror one round into MLflow: a run, a registered model version, the two aliases.

    record = log_round("sqlite:////srv/mlflow.db", facts, log_model=True)

One MLflow run per tuneloop run id, in the experiment `facts.experiment`: parameters, metrics
(and per-step curves), tags, the round's records and report as artifacts. The merged model
folder is logged under the run's `model/` and registered as a version of
`facts.registered_model` with `MlflowClient.create_model_version(source=<run artifact URI>)`
— plain files, no MLflow flavour: a `transformers` flavour log would load the model and write
a conda/pip environment for nothing, since `models:/NAME@champion` resolves to the same HF
folder either way (`mlflow.artifacts.download_artifacts`).

Aliases follow tuneloop, never the other way round: `@challenger` goes to the newest
candidate (by `tuneloop.candidate_at`, so a retried write of an older round never takes it
back), and `@champion` to the model version of the ledger's current champion (handed in as
`facts.champion_run_id`), so a promotion moves it and a rejection leaves it where it is.

Idempotent: the run and the version are found again by the tag `tuneloop.run_id`; params
already logged are not re-logged (MLflow refuses a changed param), metrics whose value is
unchanged are not appended again, and a version that exists is not created twice. Fail-safe:
any error (a bad URI, a locked or unwritable store, a server that does not answer) returns a
`failed` record instead of raising; the caller keeps going. MLflow is imported here only, and
its usage telemetry is off unless `MLFLOW_DISABLE_TELEMETRY` is set explicitly; HTTP retries
are capped (`MLFLOW_HTTP_REQUEST_MAX_RETRIES` 2, timeout 30 s, unless set) so that an
unreachable server costs seconds, not minutes.
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone
from types import ModuleType
from typing import Any

from tuneloop.config.tracking import masked_uri
from tuneloop.tracking.facts import (
    CANDIDATE_TAG,
    CHALLENGER,
    CHAMPION,
    RUN_TAG,
    RoundFacts,
    TrackingRecord,
)
from tuneloop.tracking.uri import artifact_location, require_mlflow

ERROR_CHARS = 2000
"""How much of an MLflow error the record keeps (some quote whole SQL statements)."""


def import_mlflow() -> ModuleType:
    """`mlflow`, offline by default; InputError naming the extra when it is not installed."""
    require_mlflow()
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")
    import mlflow

    return mlflow


def log_round(uri: str, facts: RoundFacts, *, log_model: bool, attempts: int = 1) -> TrackingRecord:
    """Write (or complete) the round's MLflow run; never raises for an MLflow failure."""
    t0 = time.perf_counter()
    record = TrackingRecord(
        status="failed",
        tracking_uri=masked_uri(uri),  # the record is written; the password never is
        experiment=facts.experiment,
        run_id=facts.run_id,
        registered_model=facts.registered_model if log_model and facts.model_dir else None,
        attempts=attempts,
        ledger_champion_run_id=facts.champion_run_id,
        at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        duration_s=0.0,
    )
    try:
        mlflow = import_mlflow()
        client = mlflow.MlflowClient(tracking_uri=uri, registry_uri=uri)
        record.mlflow_run_id = _run(client, facts, uri)
        _log_values(client, record.mlflow_run_id, facts)
        for path, local in sorted(facts.artifacts.items()):
            folder = path.rpartition("/")[0] or None
            client.log_artifact(record.mlflow_run_id, str(local), folder)
        if record.registered_model is not None:
            _register(client, record, facts)
        client.set_terminated(record.mlflow_run_id, "FINISHED")
        record.status = "logged"
    except Exception as err:  # fail-safe by contract: the ledger, not MLflow, is the truth
        record.error = masked_uri(f"{type(err).__name__}: {err}", uri)[:ERROR_CHARS]
    record.duration_s = round(time.perf_counter() - t0, 3)
    return record


def _run(client: Any, facts: RoundFacts, uri: str) -> str:
    """The round's MLflow run id: found again by its tag, else created."""
    exp = client.get_experiment_by_name(facts.experiment)
    if exp is None:
        exp_id = client.create_experiment(facts.experiment, artifact_location(uri))
    else:
        exp_id = exp.experiment_id
    found = client.search_runs(
        [exp_id], filter_string=f"tags.`{RUN_TAG}` = '{_quoted(facts.run_id)}'", max_results=1
    )
    if found:
        return str(found[0].info.run_id)
    run = client.create_run(exp_id, run_name=facts.run_id, tags={RUN_TAG: facts.run_id})
    return str(run.info.run_id)


def _log_values(client: Any, run_id: str, facts: RoundFacts) -> None:
    from mlflow.entities import Metric, Param, RunTag

    data = client.get_run(run_id).data
    now = int(time.time() * 1000)
    params = [Param(k, v) for k, v in facts.params.items() if k not in data.params]
    metrics = [
        Metric(k, v, now, 0) for k, v in facts.finite_metrics().items() if data.metrics.get(k) != v
    ]
    for name, points in facts.curves.items():
        if name not in data.metrics:  # a curve is logged whole, once
            metrics += [Metric(name, v, now, step) for step, v in points]
    tags = [RunTag(k, v) for k, v in facts.tags.items()]
    # log_batch takes at most 100 params, 100 tags and 1000 metrics per call
    for i in range(0, max(len(params), len(tags), 1), 100):
        client.log_batch(run_id, params=params[i : i + 100], tags=tags[i : i + 100])
    for i in range(0, len(metrics), 1000):
        client.log_batch(run_id, metrics=metrics[i : i + 1000])


def _register(client: Any, record: TrackingRecord, facts: RoundFacts) -> None:
    """Log the merged folder, register it once, then place the aliases."""
    from mlflow.exceptions import MlflowException

    name, run_id = facts.registered_model, record.mlflow_run_id
    assert run_id is not None and facts.model_dir is not None
    try:
        client.get_registered_model(name)
    except MlflowException:
        client.create_registered_model(name, tags={"tuneloop": "registered by tuneloop"})
    mine = _versions(client, name, facts.run_id)
    if mine:
        version = mine[0]
    else:
        client.log_artifacts(run_id, str(facts.model_dir), "model")
        source = f"{client.get_run(run_id).info.artifact_uri}/model"
        tags = {RUN_TAG: facts.run_id, CANDIDATE_TAG: facts.candidate_at}
        if facts.decision is not None:
            tags["tuneloop.verdict"] = facts.decision
        version = client.create_model_version(name, source, run_id=run_id, tags=tags)
    record.model_version = int(version.version)
    _place_aliases(client, name, version, facts)
    aliases = client.get_registered_model(name).aliases
    record.aliases = sorted(a for a, v in aliases.items() if int(v) == record.model_version)
    champion = aliases.get(CHAMPION)
    record.champion_version = int(champion) if champion is not None else None


def _place_aliases(client: Any, name: str, version: Any, facts: RoundFacts) -> None:
    from mlflow.exceptions import MlflowException

    try:
        current = client.get_model_version_by_alias(name, CHALLENGER)
        newer = current.tags.get(CANDIDATE_TAG, "") > facts.candidate_at
    except MlflowException:
        newer = False
    if not newer:
        client.set_registered_model_alias(name, CHALLENGER, version.version)
    if facts.champion_run_id is not None:
        champion = _versions(client, name, facts.champion_run_id)
        if champion:
            client.set_registered_model_alias(name, CHAMPION, champion[0].version)


def _versions(client: Any, name: str, run_id: str) -> list[Any]:
    """Model versions of `name` registered for tuneloop run `run_id` (oldest first)."""
    found = client.search_model_versions(
        f"name = '{_quoted(name)}' and tags.`{RUN_TAG}` = '{_quoted(run_id)}'"
    )
    return sorted(found, key=lambda v: int(v.version))


def _quoted(value: str) -> str:
    """A value for an MLflow filter string's single quotes."""
    return value.replace("\\", "\\\\").replace("'", "\\'")
