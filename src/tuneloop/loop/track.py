"""The `track` phase: mirror the finished round into MLflow (`tracking.mlflow`), last of all.

    tracking: {mlflow: default}     # loop.yaml; `tuneloop run` then ends with `track`

It runs after `promote`, so it only ever reports decisions the ledger already holds. It reads
the round's typed records — the delta report, the verdict, the promotion, the archive record,
the run state, a flywheel round's `round.json`, the train metrics — into plain
`tracking.RoundFacts` (params, metrics, tags, artifact files, the merged model, the ledger's
current champion) and hands them to `tracking.log_round`; no phase knows it exists.

Fail-safe, by design: a failed MLflow write does not fail the phase. It prints a warning,
writes `track/tracking.json` with `status: failed` and the error, and the phase's `retry`
hook (`tracking_retry`) makes the next `tuneloop run` write again — in place, not as a new
round — as it does when the tracking settings change. The fingerprint deliberately leaves the
`tracking:` section out, so that pointing a finished run at another store never redoes it as
a new round.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from tuneloop.config import LoopConfig
from tuneloop.config.tracking import masked_uri
from tuneloop.loop.context import PhaseContext
from tuneloop.loop.track_facts import champion_run, round_facts, tracking_names, tracking_uri
from tuneloop.records import read_record_if_exists, write_record

console = Console(stderr=True)


def run_track(ctx: PhaseContext) -> None:
    from tuneloop.tracking import TRACKING_FILE, TrackingRecord, log_round

    cfg, uri = ctx.cfg, tracking_uri(ctx.cfg)
    previous = read_record_if_exists(ctx.folder / TRACKING_FILE, TrackingRecord)
    attempts = previous.attempts + 1 if previous and previous.run_id == ctx.run_id else 1
    facts = round_facts(cfg, ctx.workdir, ctx.run_id)
    record = log_round(uri, facts, log_model=cfg.tracking.log_model, attempts=attempts)
    write_record(ctx.folder / TRACKING_FILE, record)
    ctx.notes.update(
        tracking=record.status,
        mlflow_run_id=record.mlflow_run_id,
        model_version=record.model_version,
        tracking_s=record.duration_s,
    )
    if record.status == "failed":
        console.print(
            f"warning: tracking: the MLflow write to {record.tracking_uri} failed "
            f"({record.error}); the run "
            "goes on and the ledger stays the source of truth; recorded in "
            f"{ctx.folder / TRACKING_FILE}, retried by the next `tuneloop run`",
            style="yellow",
            markup=False,
            highlight=False,
            soft_wrap=True,  # one line: a path in it stays copyable
        )
    else:
        where = f"{record.registered_model} v{record.model_version}" if record.model_version else ""
        aliases = " ".join(f"@{a}" for a in record.aliases)
        console.print(
            f"tracking: MLflow run {record.mlflow_run_id} in {record.tracking_uri} {where} "
            f"{aliases}".rstrip(),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )


def tracking_retry(cfg: LoopConfig, folder: Path) -> str | None:
    """Why a finished `track` phase writes again: its last write failed, the store or names
    it wrote to are not the configured ones any more, or the ledger's champion moved."""
    from tuneloop.tracking import TRACKING_FILE, TrackingRecord

    record = read_record_if_exists(folder / TRACKING_FILE, TrackingRecord)
    if record is None:
        return "no tracking record"
    if record.status == "failed":
        return f"the last MLflow write failed ({(record.error or '')[:80]}); retrying"
    experiment, model, _ = tracking_names(cfg, folder.parent)
    # the record holds the URI masked (`masked_uri`), as every record does
    uri = masked_uri(tracking_uri(cfg))
    wanted = (uri, experiment, model if cfg.tracking.log_model else None)
    if (record.tracking_uri, record.experiment, record.registered_model) != wanted:
        return "tracking settings changed; writing to the configured store"
    if record.registered_model and champion_run(cfg) != record.ledger_champion_run_id:
        return "the ledger's champion changed (an approval or a later round); moving @champion"
    return None
