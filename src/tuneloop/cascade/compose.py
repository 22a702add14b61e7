"""`tuneloop compose`: a cascade's accuracy and cost at every threshold, from each tier's own
sample log, without a new model call (`tuneloop.stats.cascade` has the rule and cites it).

Each tier is a sample log of the same suite items (its answers, scores and, for every tier but
the last, its confidences: `eval.logprobs`) and a price per million completion tokens. An
item's score is its mean over samples (unscored samples count 0, as everywhere); its
confidence is the first sample's signal (`mean_logprob` or `min_margin`: what the served
cascade sees on a greedy request), or with `agreement` the share of the item's samples whose
answer is the first sample's (k samples at a temperature above 0); its cost at a tier is
that tier's completion tokens × its price. The threshold is chosen by a declared objective
on the items given (the validation part): the most accurate setting under a cost budget, or
the cheapest whose accuracy is at least the best single tier's less ε. With `calibrate`, each
handing-off tier's signal is first mapped to P(correct) by an isotonic map fitted on the same
items (`tuneloop.stats.calibration`); the thresholds, the frontier and the descriptor (which
carries the maps, as the served cascade applies them) are then in probability units. The record
(`CompositionRecord`, in `records.composition` so that the pages read it) holds the whole
frontier, each tier alone, the objective and the choice, with the hash of what was chosen
and of the logs it was chosen on, and the chosen cascade as a champion descriptor.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tuneloop.client.confidence import signal_value
from tuneloop.errors import InputError
from tuneloop.records import canonical_json, sha256_bytes
from tuneloop.records.composition import (
    CompositionRecord,
    Objective,
    Point,
    Signal,
    TierFigures,
)
from tuneloop.samplelog import (
    EvalSummary,
    SampleRow,
    items_sha256,
    load_sample_log,
    log_sha256,
)
from tuneloop.stats.calibration import IsotonicMap, fit_isotonic
from tuneloop.stats.cascade import (
    CascadeOutcome,
    best_under_cost,
    cheapest_non_inferior,
    frontier,
)


@dataclass(frozen=True)
class Tier:
    name: str
    log: Path
    usd_per_1m: float
    """Price per million completion tokens."""
    path: Path | None = None
    """The model folder that answered the log, when the descriptor should serve it from
    there (else the log's own record: the loop's served artifact, or its endpoint)."""


def compose_logs(
    tiers: Sequence[Tier],
    *,
    signal: Signal = "mean_logprob",
    objective: Objective = "min_cost_non_inferior",
    budget: float | None = None,
    epsilon: float = 0.0,
    item_ids: Sequence[str] | None = None,
    calibrate: bool = False,
) -> CompositionRecord:
    """The frontier and the choice (module docstring); InputError naming the log for logs of
    other items or suites, or a tier that hands off without confidences."""
    if len(tiers) < 2:
        raise InputError("compose: a cascade needs at least two tiers (NAME=LOG, cheapest first)")
    if objective == "max_accuracy_under_cost" and budget is None:
        raise InputError("--budget: max_accuracy_under_cost needs a cost budget per item ($)")
    logs = [load_sample_log(t.log) for t in tiers]
    ids = sorted(item_ids) if item_ids is not None else sorted(logs[0][0].item_ids)
    first = logs[0][0]
    scores, confs, costs, figures = [], [], [], []
    for i, (tier, (summary, rows)) in enumerate(zip(tiers, logs, strict=True)):
        if summary.suite_revision != first.suite_revision:
            raise InputError(f"{tier.log}: another suite revision than {tiers[0].log}")
        missing = set(ids) - set(summary.item_ids)
        if missing:
            raise InputError(
                f"{tier.log}: tier {tier.name!r} has no answers for {len(missing)} of the "
                f"items (e.g. {sorted(missing)[0]!r}); every tier must answer every item"
            )
        s, c, k = _tier_arrays(tier, rows, ids, signal, needs_signal=i < len(tiers) - 1)
        scores.append(s)
        confs.append(c)
        costs.append(k)
        figures.append(
            TierFigures(
                name=tier.name,
                log=str(tier.log),
                log_sha256=log_sha256(tier.log),
                model=summary.model,
                usd_per_1m=tier.usd_per_1m,
                accuracy=float(s.mean()),
                cost=float(k.mean()),
            )
        )
    maps = None
    if calibrate:  # fitted on these items only: what the thresholds are chosen on
        maps = [fit_isotonic(_finite(c), s) for c, s in zip(confs[:-1], scores[:-1], strict=True)]
        confs = [m(c) for m, c in zip(maps, confs, strict=False)] + confs[len(maps) :]
    front = frontier(scores, confs, costs)
    chosen, reason = _choose(front, figures, objective, budget, epsilon)
    sealed = None
    if chosen is not None:
        what = {
            "signal": signal,
            "thresholds": list(chosen.thresholds),
            "tiers": [(t.name, t.log_sha256, t.usd_per_1m) for t in figures],
            "objective": objective,
            "budget": budget,
            "epsilon": epsilon,
            **({"calibration": _maps_json(maps)} if maps is not None else {}),
        }
        sealed = sha256_bytes(canonical_json(what).encode())
    return CompositionRecord(
        signal=signal,
        objective=objective,
        budget=budget,
        epsilon=epsilon,
        n_items=len(ids),
        item_ids_sha256=items_sha256(ids),
        tiers=figures,
        frontier=[_point(o) for o in front],
        chosen=_point(chosen) if chosen is not None else None,
        chosen_sha256=sealed,
        reason=reason,
        calibration=_maps_json(maps) if maps is not None else None,
        descriptor=(
            _descriptor(tiers, logs, figures, signal, _served(chosen, confs), sealed, maps)
            if chosen is not None and all(math.isfinite(t) for t in chosen.thresholds)
            else None  # +inf hands every item on: that tier alone, not a cascade
        ),
    )


def _finite(conf: np.ndarray) -> np.ndarray:
    """The signal with +inf (no margin to measure: certain) above every finite value, so that
    the map can be fitted; applied, the map holds its top value there."""
    finite = conf[np.isfinite(conf)]
    top = float(finite.max()) + 1.0 if finite.size else 0.0
    return np.where(np.isposinf(conf), top, conf)


def _maps_json(maps: list[IsotonicMap]) -> list[dict[str, list[float]] | None]:
    return [{"x": list(m.x), "y": list(m.y)} for m in maps] + [None]


def _served(chosen: CascadeOutcome, confs: Sequence[np.ndarray]) -> list[float]:
    """The thresholds a served cascade gets: each midway between the chosen one (the lowest
    confidence it keeps) and the next lower confidence of its tier on these items — the same
    items kept, with the widest margin either side for a confidence served a hair off its
    logged value (batching, another kernel)."""
    out = []
    for t, conf in zip(chosen.thresholds, confs, strict=False):
        below = conf[conf < t]
        out.append(float((below.max() + t) / 2) if below.size else float(t))
    return out


def _descriptor(
    given: Sequence[Tier],
    logs: Sequence[tuple[EvalSummary, list[SampleRow]]],
    tiers: list[TierFigures],
    signal: Signal,
    thresholds: list[float],
    sealed: str | None,
    maps: list[IsotonicMap] | None,
) -> dict[str, Any]:
    components = []
    for i, (tier, (summary, _), figures) in enumerate(zip(given, logs, tiers, strict=True)):
        artifact = summary.served_as.artifact if summary.served_as is not None else None
        if tier.path is not None:
            where: dict[str, Any] = {"path": str(tier.path)}
        elif artifact is not None and artifact.kind == "model":
            where = {"path": artifact.path, "sha256": artifact.sha256}
        else:
            where = {"endpoint": summary.endpoint, "model": summary.model}
        last = i == len(tiers) - 1
        components.append(
            {
                "role": f"tier-{i + 1}",
                "name": figures.name,
                **where,
                "usd_per_1m": figures.usd_per_1m,
                # the last tier always answers
                **({} if last else {"signal": signal, "threshold": thresholds[i]}),
                **(
                    {"calibration": {"x": list(maps[i].x), "y": list(maps[i].y)}}
                    if maps is not None and not last
                    else {}
                ),
            }
        )
    name = "-".join(t.name for t in tiers)
    return {
        "kind": "cascade",
        "name": name,
        "components": components,
        "composition_sha256": sealed,
    }


def _tier_arrays(
    tier: Tier, rows: list[SampleRow], ids: list[str], signal: Signal, *, needs_signal: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    by_item: dict[str, list[SampleRow]] = {}
    for r in rows:
        by_item.setdefault(r.item_id, []).append(r)
    s, c, k = [], [], []
    for item in ids:
        mine = sorted(by_item.get(item, []), key=lambda r: r.sample_index)
        s.append(float(np.mean([r.value for r in mine])) if mine else 0.0)
        first = mine[0] if mine else None
        if signal == "agreement":  # the share of samples that say what the first one said
            said = [(r.completion or "").strip() for r in mine if r.status == "ok"]
            value = said.count(said[0]) / len(mine) if said and len(mine) > 1 else None
        else:
            conf = first.confidence if first is not None else None
            value = signal_value(conf, signal) if conf is not None else None
        if value is None and needs_signal:
            how = (
                "evaluate it with eval.n_samples > 1 at a temperature above 0"
                if signal == "agreement"
                else "evaluate it with eval.logprobs (`tuneloop eval --logprobs`) on a server "
                "that returns logprobs"
            )
            raise InputError(
                f"{tier.log}: tier {tier.name!r} hands off on {signal}, but item {item!r} has "
                f"no such confidence: {how}"
            )
        c.append(np.nan if value is None else float(value))
        tokens = [r.completion_tokens or 0 for r in mine]
        k.append((float(np.mean(tokens)) if tokens else 0.0) * tier.usd_per_1m / 1e6)
    return np.asarray(s), np.asarray(c), np.asarray(k)


def _choose(
    front: list[CascadeOutcome],
    tiers: list[TierFigures],
    objective: Objective,
    budget: float | None,
    epsilon: float,
) -> tuple[CascadeOutcome | None, str]:
    if objective == "max_accuracy_under_cost":
        assert budget is not None
        chosen = best_under_cost(front, budget)
        if chosen is None:
            return None, f"no setting costs at most ${budget:g} per item"
        return chosen, (
            f"the most accurate setting at most ${budget:g} per item: "
            f"{chosen.accuracy:.1%} at ${chosen.cost:.3g}"
        )
    best = max(tiers, key=lambda t: (t.accuracy, -t.cost))
    chosen = cheapest_non_inferior(front, best.accuracy, epsilon)
    if chosen is None:
        return None, f"no setting reaches {best.name!r}'s {best.accuracy:.1%} less {epsilon:g}"
    saving = 1 - chosen.cost / best.cost if best.cost > 0 else 0.0
    if round(saving, 2) > 0:
        than = f"{saving:.0%} less than {best.name!r} alone"
    elif round(saving, 2) == 0:
        than = f"what {best.name!r} alone costs: the cascade does not pay off here"
    else:
        than = f"{-saving:.0%} more than {best.name!r} alone: the cascade does not pay off here"
    return chosen, (
        f"the cheapest setting at least as accurate as the best single tier {best.name!r} "
        f"({best.accuracy:.1%}) less ε {epsilon:g}: {chosen.accuracy:.1%} at "
        f"${chosen.cost:.3g} per item, {than}"
    )


def _point(o: CascadeOutcome) -> Point:
    return Point(
        thresholds=list(o.thresholds),
        accuracy=o.accuracy,
        cost=o.cost,
        coverage=list(o.coverage),
    )
