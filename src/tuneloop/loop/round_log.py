"""How a round ended: an outcome row in the ledger and one EXPERIMENT-LOG.md entry, appended.

Read from the round's own artifacts after it stops (typed records; missing ones are said to be
missing): the corpus build's per-step counts, the training recipe and its seconds, the report
on the audit part (Δ with CI and p), the gate's verdict and reasons, the champion after.
A round refused before training gets the same entry with the reason instead of figures.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tuneloop.config import LoopConfig
from tuneloop.loop.layout import ledger_path
from tuneloop.records import read_record_if_exists

TERMINAL = ("promoted", "finished", "rejected", "awaiting_approval", "refused")
"""Outcomes after which `--round next` starts a new round rather than resuming this one."""


def record_outcome(
    cfg: LoopConfig,
    round_id: str,
    outcome: str,
    *,
    round_cfg: LoopConfig | None = None,
    record: dict[str, Any] | None = None,
    run_id: str | None = None,
    reason: str = "",
    wall_s: float = 0.0,
) -> dict[str, Any]:
    """Append the outcome to the ledger (a start row first if the round never started) and
    its entry to the experiment log; returns the outcome record."""
    from tuneloop.gate.explog import append_entry, log_path
    from tuneloop.gate.ledger_rounds import add_outcome, add_round
    from tuneloop.gate.ledger_store import connect, transaction

    ended = datetime.now(timezone.utc).isoformat(timespec="seconds")
    figures = _figures(round_cfg) if round_cfg is not None else {}
    result = {
        "round_id": round_id,
        "ended_at": ended,
        "outcome": outcome,
        "run_id": run_id,
        "reason": reason,
        "wall_s": round(wall_s, 1),
        **figures,
    }
    start = record or {"round_id": round_id, "started_at": ended, "gate_slice": ""}
    conn = connect(ledger_path(cfg))
    try:
        with transaction(conn):
            add_round(conn, start)
            add_outcome(conn, result)
    finally:
        conn.close()
    append_entry(log_path(ledger_path(cfg)), f"round {round_id} {ended}", entry(start, result))
    return result


def _figures(rcfg: LoopConfig) -> dict[str, Any]:
    """What the round's artifacts say: corpus counts, recipe, audit Δ, verdict, cost."""
    from tuneloop.gate.verdict_record import GateVerdict
    from tuneloop.records import CorpusProvenance
    from tuneloop.report.record import DeltaReport
    from tuneloop.train.settings import TrainRunRecord

    w = rcfg.workdir
    out: dict[str, Any] = {}
    corpus = read_record_if_exists(w / "data" / "provenance.json", CorpusProvenance)
    if corpus is not None:
        out["corpus_counts"] = corpus.counts
    trained = read_record_if_exists(w / "train" / "adapter" / "train_settings.json", TrainRunRecord)
    if trained is not None:
        s = trained.settings
        out["recipe"] = {
            "method": trained.method,
            "steps": s.get("steps"),
            "learning_rate": s.get("learning_rate"),
            "batch_size": s.get("batch_size"),
            "lora_r": (s.get("lora") or {}).get("r"),
            "data_rows": trained.data_rows,
        }
        out["train_seconds"] = trained.seconds
    delta = read_record_if_exists(w / "report" / "delta.json", DeltaReport)
    if delta is not None:
        out["audit"] = {
            "n_items": delta.n_items,
            "pre": delta.pre.mean,
            "post": delta.post.mean,
            "delta": delta.delta,
            "ci": list(delta.delta_ci),
            "p_two_sided": delta.p_two_sided,
        }
    verdict = read_record_if_exists(w / "gate" / "verdict.json", GateVerdict)
    if verdict is not None:
        out["gate"] = {
            "decision": verdict.decision,
            "reasons": verdict.reasons,
            "delta": verdict.stats.get("delta"),
            "p_value": verdict.stats.get("p_value"),
            "n_items": verdict.stats.get("n_items"),
        }
    return out


def entry(start: dict[str, Any], r: dict[str, Any]) -> str:
    """The Markdown entry of one round's end."""
    lines = [f"## {r['ended_at']} — round `{r['round_id']}` — **{r['outcome']}**", ""]
    if start.get("parent"):
        boot = " (bootstrap: a null baseline, not a won decision)" if start.get("bootstrap") else ""
        lines.append(
            f"- Parent: champion v{start['parent_version']}{boot} — `{start['base_model']}`"
        )
    lines.append(f"- Trigger: {_trigger(start.get('trigger') or {})}")
    if start.get("gate_slice"):
        lines.append(f"- Gate slice: `{start['gate_slice']}`; evaluated `{start['eval_slice']}`")
    if r.get("reason"):
        lines.append(f"- Why: {r['reason']}")
    if "corpus_counts" in r:
        steps = " → ".join(f"{k} {v}" for k, v in r["corpus_counts"].items())
        lines.append(f"- Data after each corpus step: {steps}")
    if "recipe" in r:
        lines.append(f"- Recipe: {_kv(r['recipe'])}")
    if "audit" in r:
        a = r["audit"]
        lines.append(
            f"- Audit ({a['n_items']} items): {a['pre']:.4f} → {a['post']:.4f}, "
            f"Δ {a['delta']:+.4f} [{a['ci'][0]:+.4f}, {a['ci'][1]:+.4f}], "
            f"p two-sided {a['p_two_sided']:.3g}"
        )
    if "gate" in r:
        g = r["gate"]
        why = "; ".join(g["reasons"]) or "all conditions passed"
        lines.append(
            f"- Gate ({g['n_items']} items): Δ {g['delta']:+.4f}, one-sided p "
            f"{g['p_value']:.3g} — **{g['decision']}** ({why})"
        )
    cost = f"{r['wall_s']:.1f} s wall"
    if "train_seconds" in r:
        cost += f", {r['train_seconds']:.1f} s training"
    lines.append(f"- Time and cost: {cost}" + (f"; run `{r['run_id']}`" if r["run_id"] else ""))
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


def last_outcome(cfg: LoopConfig, round_id: str) -> str | None:
    """The latest recorded outcome of a round (None: never ended)."""
    from tuneloop.gate.ledger_rounds import rounds
    from tuneloop.gate.ledger_store import connect

    path = ledger_path(cfg)
    if not Path(path).exists():
        return None
    conn = connect(path)
    try:
        found = [r for r in rounds(conn) if r["round_id"] == round_id]
    finally:
        conn.close()
    outcomes = found[0]["outcomes"] if found else []
    return outcomes[-1]["outcome"] if outcomes else None
