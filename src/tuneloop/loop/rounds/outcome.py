"""How a round ended: a `RoundOutcome` appended to the ledger, and one EXPERIMENT-LOG.md entry.

The figures are read from the round's own artifacts after it stops (typed records; one that is
not there leaves its figure out): the corpus build's per-step counts, the training recipe and
its seconds, the report on the audit part (Δ with CI and p), the gate's verdict and reasons.
A round refused before training gets the same entry with the reason instead of figures. The
record is `tuneloop.gate.ledger.RoundOutcome` (defined beside the ledger that stores it); a
round's latest outcome is `tuneloop.gate.ledger.last_outcome`.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from tuneloop.config import LoopConfig
from tuneloop.gate.explog import append_entry, log_path
from tuneloop.gate.ledger import (
    AuditFigures,
    GateFigures,
    Recipe,
    RoundEnd,
    RoundOutcome,
    RoundStart,
    open_ledger,
)
from tuneloop.gate.verdict_record import GateVerdict
from tuneloop.loop.layout import RunLayout, ledger_path
from tuneloop.records import CorpusProvenance, read_record_if_exists
from tuneloop.train.settings import TrainRunRecord

TERMINAL = ("promoted", "finished", "rejected", "awaiting_approval", "refused")
"""Outcomes after which `--round next` starts a new round rather than resuming this one."""


def record_outcome(
    cfg: LoopConfig,
    round_id: str,
    outcome: RoundEnd,
    *,
    round_cfg: LoopConfig | None = None,
    start: RoundStart | None = None,
    run_id: str | None = None,
    reason: str = "",
    wall_s: float = 0.0,
) -> RoundOutcome:
    """Append the outcome to the ledger (`start` first if the round never started) and its
    entry to the experiment log; returns the outcome record."""
    ended = datetime.now(timezone.utc).isoformat(timespec="seconds")
    result = RoundOutcome(
        round_id=round_id,
        ended_at=ended,
        outcome=outcome,
        run_id=run_id,
        reason=reason,
        wall_s=round(wall_s, 1),
        **(_figures(round_cfg) if round_cfg is not None else {}),
    )
    start = start or RoundStart(round_id=round_id, started_at=ended, gate_slice="")
    with open_ledger(ledger_path(cfg)) as ledger, ledger.transaction():
        ledger.add_round(start)
        ledger.add_outcome(result)
    append_entry(log_path(ledger_path(cfg)), f"round {round_id} {ended}", entry(start, result))
    return result


def _figures(rcfg: LoopConfig) -> dict[str, Any]:
    """What the round's artifacts say: corpus counts, recipe, audit Δ, verdict, cost."""
    from tuneloop.report.record import DeltaReport  # numpy, through stats

    layout = RunLayout(rcfg.workdir)
    out: dict[str, Any] = {}
    corpus = read_record_if_exists(layout.corpus_provenance, CorpusProvenance)
    if corpus is not None:
        out["corpus_counts"] = corpus.counts
    trained = read_record_if_exists(layout.train_settings, TrainRunRecord)
    if trained is not None:
        s = trained.settings
        out["recipe"] = Recipe(
            method=trained.method,
            steps=s.get("steps"),
            learning_rate=s.get("learning_rate"),
            batch_size=s.get("batch_size"),
            lora_r=(s.get("lora") or {}).get("r"),
            data_rows=trained.data_rows,
        )
        out["train_seconds"] = trained.seconds
    delta = read_record_if_exists(layout.delta, DeltaReport)
    if delta is not None:
        out["audit"] = AuditFigures(
            n_items=delta.n_items,
            pre=delta.pre.mean,
            post=delta.post.mean,
            delta=delta.delta,
            ci=delta.delta_ci,
            p_two_sided=delta.p_two_sided,
        )
    verdict = read_record_if_exists(layout.verdict, GateVerdict)
    if verdict is not None:
        out["gate"] = GateFigures(
            decision=verdict.decision,
            reasons=verdict.reasons,
            delta=verdict.stats.get("delta"),
            p_value=verdict.stats.get("p_value"),
            n_items=verdict.stats.get("n_items"),
        )
    return out


def entry(start: RoundStart, r: RoundOutcome) -> str:
    """The Markdown entry of one round's end."""
    lines = [f"## {r.ended_at} — round `{r.round_id}` — **{r.outcome}**", ""]
    if start.parent:
        boot = " (bootstrap: a null baseline, not a won decision)" if start.bootstrap else ""
        lines.append(f"- Parent: champion v{start.parent_version}{boot} — `{start.base_model}`")
    lines.append(f"- Trigger: {_trigger(start.trigger)}")
    if start.gate_slice:
        lines.append(f"- Gate slice: `{start.gate_slice}`; evaluated `{start.eval_slice}`")
    if r.reason:
        lines.append(f"- Why: {r.reason}")
    if r.corpus_counts is not None:
        steps = " → ".join(f"{k} {v}" for k, v in r.corpus_counts.items())
        lines.append(f"- Data after each corpus step: {steps}")
    if r.recipe is not None:
        lines.append(f"- Recipe: {_kv(r.recipe.model_dump())}")
    if r.audit is not None:
        a = r.audit
        lines.append(
            f"- Audit ({a.n_items} items): {a.pre:.4f} → {a.post:.4f}, "
            f"Δ {a.delta:+.4f} [{a.ci[0]:+.4f}, {a.ci[1]:+.4f}], "
            f"p two-sided {a.p_two_sided:.3g}"
        )
    if r.gate is not None:
        g = r.gate
        why = "; ".join(g.reasons) or "all conditions passed"
        lines.append(
            f"- Gate ({g.n_items} items): Δ {g.delta:+.4f}, one-sided p "
            f"{g.p_value:.3g} — **{g.decision}** ({why})"
        )
    cost = f"{r.wall_s:.1f} s wall"
    if r.train_seconds is not None:
        cost += f", {r.train_seconds:.1f} s training"
    lines.append(f"- Time and cost: {cost}" + (f"; run `{r.run_id}`" if r.run_id else ""))
    return "\n".join(lines) + "\n"


def _trigger(trigger: dict[str, Any]) -> str:
    """What fired, with its figures (a watcher's trigger file), or the keys as given."""
    if not trigger:
        return "manual (no trigger file)"
    firings = [f for f in trigger.get("firings", []) if isinstance(f, dict) and f.get("fired")]
    if firings:
        return "; ".join(f"{f.get('name')}: {f.get('detail')}" for f in firings)
    return _kv(trigger)


def _kv(d: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.items())
