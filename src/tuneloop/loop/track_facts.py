"""A finished round's records, read typed, as the plain `tracking.RoundFacts` MLflow is given.

Parameters are the config essentials under their loop.yaml keys (`train.learning_rate`,
`train.lora.r`, …) plus the hashes that identify the round (config, base and merged model,
suite revision); metrics are the delta report's arm means, Δ, CI and p (and per tag), the
gate's own figures with the verdict as `gate.promote` (1 or 0), and the phase timings; the
training log becomes per-step curves. Every value comes from an artifact of this run; a record
that does not exist (no gate, no archive) contributes nothing rather than a placeholder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuneloop.archive import MANIFEST
from tuneloop.config import LoopConfig
from tuneloop.loop.context import MERGED_MODEL
from tuneloop.loop.handover import recorded_hash
from tuneloop.loop.layout import RunLayout, ledger_path
from tuneloop.loop.rounds import RoundRecord
from tuneloop.loop.state import RunState
from tuneloop.records import (
    Archived,
    canonical_json,
    read_record,
    read_record_if_exists,
    sha256_bytes,
)
from tuneloop.tracking import RoundFacts, metric_name


def artifact_files(run: RunLayout) -> tuple[Path, ...]:
    """Run-folder files logged as artifacts, under the same relative path, when they exist."""
    return (
        run.delta,
        run.delta_md,
        run.verdict,
        run.capstone_md,
        run.capstone_html,
        run.promotion,
        run.archived,
        run.state,
        run.round_file,
    )


def tracking_uri(cfg: LoopConfig) -> str:
    """`tracking.mlflow`, `default` resolved beside the gate ledger (shared by all rounds)."""
    from tuneloop.tracking import resolve_uri

    assert cfg.tracking.mlflow is not None
    return resolve_uri(cfg.tracking.mlflow, ledger_path(cfg).parent)


def tracking_names(cfg: LoopConfig, workdir: Path) -> tuple[str, str, str | None]:
    """(experiment, registered model, round id): a round's `-rNNNN` suffix is not part of
    the names, so that every round of a flywheel lands in one experiment and one model."""
    lineage = read_record_if_exists(RunLayout(workdir).round_file, RoundRecord)
    round_id = lineage.round_id if lineage is not None else None
    name = cfg.name.removesuffix(f"-{round_id}") if round_id else cfg.name
    experiment = cfg.tracking.experiment or name
    return experiment, cfg.tracking.registered_model or experiment, round_id


def config_sha256(cfg: LoopConfig) -> str:
    """Hash of the resolved config (the `tracking:` section left out: it changes no result)."""
    return sha256_bytes(canonical_json(cfg.model_dump(mode="json", exclude={"tracking"})).encode())


def round_facts(cfg: LoopConfig, workdir: Path, run_id: str) -> RoundFacts:
    from tuneloop.gate.promotion import Promotion
    from tuneloop.gate.verdict_record import GateVerdict
    from tuneloop.report.record import DeltaReport

    run = RunLayout(workdir)
    state = read_record(run.state, RunState)
    delta = read_record_if_exists(run.delta, DeltaReport)
    verdict = read_record_if_exists(run.verdict, GateVerdict)
    promotion = read_record_if_exists(run.promotion, Promotion)
    archived = read_record_if_exists(run.archived, Archived)
    experiment, model, round_id = tracking_names(cfg, workdir)
    merge = state.phases.get("merge")
    metrics = {**_delta_metrics(delta), **_gate_metrics(verdict), **_timings(state)}
    tags = {"tuneloop.run_id": run_id, "tuneloop.verdict": _decision(verdict)}
    if round_id:
        tags["tuneloop.round_id"] = round_id
    if verdict is not None:
        tags["tuneloop.evidence_sha256"] = verdict.evidence_sha256 or ""
        tags["mlflow.note.content"] = _note(verdict)
    if promotion is not None and promotion.champion_version is not None:
        tags["tuneloop.champion_version"] = str(promotion.champion_version)
    artifacts = {
        path.relative_to(workdir).as_posix(): path for path in artifact_files(run) if path.is_file()
    }
    if archived is not None:
        tags.update(
            {
                "tuneloop.archive": archived.path,
                "tuneloop.manifest_sha256": archived.manifest_sha256,
            }
        )
        manifest = Path(archived.path) / MANIFEST
        if manifest.is_file():
            artifacts[f"{run.archive.name}/{MANIFEST}"] = manifest
    model_dir = run.merged_model
    return RoundFacts(
        run_id=run_id,
        experiment=experiment,
        registered_model=model,
        candidate_at=(merge.ended_at if merge else None) or state.created_at,
        params=_params(cfg, state, delta),
        metrics=metrics,
        curves=_curves(run.train_metrics),
        tags=tags,
        artifacts=artifacts,
        model_dir=model_dir if model_dir.is_dir() else None,
        decision=verdict.decision if verdict is not None else None,
        champion_run_id=champion_run(cfg),
    )


def _params(cfg: LoopConfig, state: RunState, delta: Any) -> dict[str, str]:
    t, e, g = cfg.train, cfg.eval, cfg.gate
    merge = state.phases.get("merge")
    values: dict[str, Any] = {
        "base_model": cfg.base,
        "base_model_sha256": recorded_hash(state, "eval_pre", "base_model"),
        "merged_model_sha256": merge.outputs.get(MERGED_MODEL) if merge else None,
        "config_sha256": config_sha256(cfg),
        "suite.path": cfg.suite.path,
        "suite.revision": delta.suite_revision if delta is not None else None,
        "train.method": t.method,
        "train.steps": t.steps,
        "train.learning_rate": t.learning_rate,
        "train.batch_size": t.batch_size,
        "train.seed": t.seed,
        "train.lora.r": t.lora.r,
        "train.lora.alpha": t.lora.alpha,
        "train.data": t.data,
        "merge.zero_adapter": cfg.merge.zero_adapter,
        "eval.n_samples": e.n_samples,
        "eval.temperature": e.temperature,
        "eval.seed": e.seed,
        "serve.backend": cfg.serve.backend,
    }
    if g.enabled:
        values.update(
            {
                "gate.slice": g.slice,
                "gate.metric": g.metric,
                "gate.margin": g.margin,
                "gate.alpha": g.alpha,
                "gate.test": g.test,
                "gate.seed": g.seed,
            }
        )
    return {k: str(v) for k, v in values.items() if v is not None}


def _delta_metrics(delta: Any) -> dict[str, float]:
    if delta is None:
        return {}
    low, high = delta.delta_ci
    out = {
        "pre_mean": delta.pre.mean,
        "post_mean": delta.post.mean,
        "delta": delta.delta,
        "delta_ci_low": low,
        "delta_ci_high": high,
        "p_two_sided": delta.p_two_sided,
        "p_greater": delta.p_greater,
        "n_items": delta.n_items,
        "flips.wrong_to_right": delta.flips.wrong_to_right,
        "flips.right_to_wrong": delta.flips.right_to_wrong,
    }
    if delta.d_z is not None:
        out["d_z"] = delta.d_z
    for tag in delta.per_tag:
        out[f"tag.{metric_name(tag.tag)}.delta"] = tag.delta
    return {k: float(v) for k, v in out.items()}


def _gate_metrics(verdict: Any) -> dict[str, float]:
    if verdict is None:
        return {}
    out = {
        f"gate.{k}": float(v)
        for k, v in verdict.stats.items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }
    out["gate.promote"] = 1.0 if verdict.decision == "promote" else 0.0
    return out


def _timings(state: RunState) -> dict[str, float]:
    return {
        f"time.{name}_s": rec.duration_s
        for name, rec in state.phases.items()
        if rec.status == "done" and rec.duration_s is not None
    }


def _curves(path: Path) -> dict[str, list[tuple[int, float]]]:
    from tuneloop.records.train_metrics import read_train_metrics

    if not path.is_file():
        return {}
    curves: dict[str, list[tuple[int, float]]] = {}
    for row in read_train_metrics(path):
        for key, value in row.values().items():
            curves.setdefault(f"train.{metric_name(key)}", []).append((row.step, value))
    return curves


def _decision(verdict: Any) -> str:
    return verdict.decision if verdict is not None else "no gate"


def _note(verdict: Any) -> str:
    why = "; ".join(verdict.reasons) if verdict.reasons else "every condition held"
    return f"tuneloop gate: **{verdict.decision}** — {why}"


def champion_run(cfg: LoopConfig) -> str | None:
    """The run whose model is the ledger's champion now (None: bootstrap, or no ledger)."""
    from tuneloop.gate.promotion import champion_history

    history = champion_history(ledger_path(cfg))
    return history[-1].run_id if history else None
