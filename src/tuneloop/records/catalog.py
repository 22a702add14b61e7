"""Every record tuneloop writes as an artifact, by class name: the one place to find them.

Records that need nothing but this package are defined here (`manifest`, `corpus`,
`trace`, `replay`). The others are defined beside the phase that writes them, because they are
built from that phase's own types (the verdict's `Bar`, the delta report's `stats.FlipCounts`)
and core imports no phase and no shared library (docs/design.md, §3 "Layering").

Deliberately by module name, not by import: importing the classes here would make this core
package import every phase, and close a file-level import cycle with each of them (a phase's
record module imports `tuneloop.records`). So this table names each class's module, and
`tuneloop.records.<Class>` loads one only when asked for; importing `tuneloop.records` never
imports a phase. `tests/test_records.py` fails when a `Record` subclass anywhere in `src/` is
missing from this table or listed under the wrong module.
"""

from __future__ import annotations

from importlib import import_module

from tuneloop.records.base import Record

RECORDS: dict[str, tuple[str, str]] = {
    # class: (defining module, the artifact it describes)
    "SampleRow": ("tuneloop.samplelog.rows", "eval_*/samples.jsonl, one row per (item, sample)"),
    "EvalSummary": ("tuneloop.samplelog.summary", "eval_*/summary.json"),
    "Trace": ("tuneloop.records.trace", "traces JSONL (`tuneloop ingest`; data/traces.jsonl)"),
    "CorpusProvenance": ("tuneloop.records.corpus", "data/provenance.json"),
    "ReplayCall": ("tuneloop.records.replay", "<replay out>/calls.jsonl (`tuneloop replay`)"),
    "ReplayReport": ("tuneloop.records.replay", "<replay out>/report.json"),
    "SelectionDecision": (
        "tuneloop.records.selection",
        "`tuneloop select --out`; challengers/selection.json's decision",
    ),
    "PortfolioRecord": ("tuneloop.records.selection", "challengers/selection.json (portfolio)"),
    "CompositionRecord": (
        "tuneloop.records.composition",
        "`tuneloop compose --out`; compose/composition.json (cascade round)",
    ),
    "TrainRunRecord": ("tuneloop.train.settings", "train/adapter/train_settings.json"),
    "RunBudget": ("tuneloop.train.budget", "train/adapter/budget.json (`train.max_seconds`)"),
    "HealthStop": (
        "tuneloop.train.walkback",
        "train/adapter.partial/health_stop.json (a train.health stop, read by run.train)",
    ),
    "DilocoRunRecord": (
        "tuneloop.train.distributed.diloco",
        "train/adapter/diloco.json (train.diloco)",
    ),
    "ReplicaSummary": (
        "tuneloop.train.distributed.diloco",
        "train/adapter/replica_<i>.json (train.diloco)",
    ),
    "DdpRankSummary": (
        "tuneloop.train.distributed.plain_ddp",
        "<out>/ddp_rank_<r>.json (DiLoCo's reference)",
    ),
    "FlywheelStatus": ("tuneloop.flywheel.status", "`tuneloop status --json`"),
    "RoundRecord": ("tuneloop.loop.rounds.lineage", "<workdir>/rounds/<id>/round.json"),
    "RoundTrigger": (
        "tuneloop.flywheel.watch.state",
        "<workdir>/flywheel/<round>.trigger.json (tuneloop watch)",
    ),
    "Lineage": ("tuneloop.train.checkpoint.merge", "merge/model/lineage.json"),
    "DeltaReport": ("tuneloop.report.record", "report/delta.json"),
    "SealedBar": ("tuneloop.gate.ledger.rows", "eval_post/sealed_bar.json, and in the ledger"),
    "RoundOutcome": ("tuneloop.gate.ledger.rounds", "each end of a round, in the ledger"),
    "GateVerdict": ("tuneloop.gate.verdict_record", "gate/verdict.json"),
    "Promotion": ("tuneloop.gate.promotion", "promote/promotion.json"),
    "TrackingRecord": ("tuneloop.tracking.facts", "track/tracking.json (MLflow interop)"),
    "PhaseRecord": ("tuneloop.loop.state", "<phase>/phase.json, and each phase in state.json"),
    "RunState": ("tuneloop.loop.state", "state.json"),
    "Manifest": ("tuneloop.records.manifest", "<archive root>/<run>/manifest.json"),
    "Archived": ("tuneloop.records.manifest", "archive/archived.json"),
    "JudgeCalibration": (
        "tuneloop.records.judge",
        "the judge file's `calibration:` path (tuneloop judge calibrate)",
    ),
    "ShadowPair": (
        "tuneloop.records.shadow",
        "<log-dir>/shadow/pairs.jsonl (tuneloop proxy --shadow)",
    ),
    "ShadowState": ("tuneloop.records.shadow", "<log-dir>/shadow/state.json"),
    "ShadowReport": (
        "tuneloop.records.shadow",
        "<out>/shadow-report.json (tuneloop shadow report)",
    ),
}


def record_class(name: str) -> type[Record]:
    """The record class `name`, imported from where it is defined."""
    module, _ = RECORDS[name]
    cls = getattr(import_module(module), name)
    if not (isinstance(cls, type) and issubclass(cls, Record)):
        raise TypeError(f"{module}.{name} is not a Record")
    return cls


def record_classes() -> dict[str, type[Record]]:
    """Every record class, by schema id (`tuneloop.<kind>/<version>`)."""
    classes = (record_class(name) for name in RECORDS)
    return {cls.schema_id(): cls for cls in classes}
