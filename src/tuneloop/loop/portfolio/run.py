"""The `challengers` phase of a portfolio round, and the hand-over of its choice to `train`.

    challengers: seal the selection rule → each challenger's own round (train → merge →
                 doctor → its evaluation on the selection slice) → the sealed rule picks one
                 → challengers/selection.json
    train:       the selected challenger's adapter, copied and checked against its hash

The selection rule, the challengers (names and overrides) and the adjudication mode are sealed
in the ledger (`gate.seal.seal_selection`) before the first challenger trains, so no number
can move them. Each challenger runs as a round of its own (`challenger_config`, through the
runner's `ctx.nested`), so a crash resumes inside the challenger it stopped in, and a
challenger that fails (a phase error, an unhealthy training run that could not walk back) is
recorded with its error and skipped; the round goes on with the others, and fails only when
every challenger did.

`gate.adjudicate: selected` (the default) evaluates the challengers on the selection slice only:
the gate slice is never evaluated for a challenger the rule did not choose. `all` evaluates
every challenger on the gate slice, with the bar sealed first; each one's one-sided p against
the champion (`gate.pretest`) goes into Holm's step-down at the bar's α, and the challenger Holm
rejects for (its other conditions passing) that is cheapest to serve — fewest completion tokens
per answer on that evaluation, `samplelog.mean_completion_tokens` — is the one the gate
adjudicates at its Holm level (`adjudication.alpha_used` in the verdict). With none rejected,
the smallest p is adjudicated at its level and rejected there, so the slice's one look is
still recorded.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from rich.console import Console

from tuneloop.config import LoopConfig
from tuneloop.errors import InputError, PhaseFailed
from tuneloop.gate.ledger import open_ledger
from tuneloop.gate.seal import seal_selection
from tuneloop.loop.context import MERGED_MODEL, TRAINED_ADAPTER, PhaseContext
from tuneloop.loop.integrity import gate_bar, gate_items, seal_round
from tuneloop.loop.layout import ADAPTER, RunLayout, ledger_path, slice_ids
from tuneloop.loop.portfolio.approval import approved_how
from tuneloop.loop.portfolio.budget import RoundEstimate, compared_slice, estimate_round
from tuneloop.loop.portfolio.challengers import (
    Challenger,
    challenger_config,
    default_of,
    effective_config,
    expand,
)
from tuneloop.loop.portfolio.recipe import recipe_of
from tuneloop.loop.state import RunState, load_state, now_iso
from tuneloop.records import read_record, read_record_if_exists, sha256_path, write_record
from tuneloop.records.selection import (
    ChallengerRow,
    PairFigures,
    PortfolioRecord,
    SelectionDecision,
)
from tuneloop.samplelog import load_sample_log, mean_completion_tokens

console = Console(stderr=True)


def champion_recipe(cfg: LoopConfig) -> tuple[dict[str, Any] | None, int]:
    """The recipe the ledger's champion was trained with (None if not recorded), and how many
    portfolio rounds were decided since it was promoted (`portfolio.stages` reads both)."""
    db = ledger_path(cfg)
    if not db.exists():
        return None, 0
    with open_ledger(db) as ledger:
        champion = ledger.current_champion()
        verdicts = ledger.verdicts()
    if champion is None:
        return None, 0
    recipe = champion.descriptor.get("recipe")
    since = [
        v for v in verdicts if v.adjudication is not None and v.decided_at > champion.promoted_at
    ]
    return (recipe if isinstance(recipe, dict) else None), len(since)


def portfolio_challengers(cfg: LoopConfig) -> list[Challenger]:
    assert cfg.portfolio is not None
    return expand(cfg.portfolio, *champion_recipe(cfg))


def sealed_rule(
    cfg: LoopConfig, run_id: str | None, challengers: list[Challenger], default: str | None
) -> dict[str, Any]:
    """What the selection seal fixes: the rule, the challengers, the default, the mode (and
    under `all` the round's bar, whose α Holm splits: under `gate.sequence`, run `run_id`'s
    α_k)."""
    assert cfg.portfolio is not None
    rule: dict[str, Any] = {
        "selection": cfg.portfolio.selection.model_dump(mode="json"),
        "adjudicate": cfg.gate.adjudicate,
        "challengers": {c.name: c.overrides for c in challengers},
        "default": default,
    }
    if cfg.gate.adjudicate == "all":
        rule["holm"] = {"bar": gate_bar(cfg, run_id).to_dict(), "k": len(challengers)}
    return rule


def run_challengers(ctx: PhaseContext) -> None:
    cfg = ctx.cfg
    assert cfg.portfolio is not None and ctx.nested is not None
    challengers = portfolio_challengers(cfg)
    found = estimate_round(cfg, challengers)
    how = approved_how(cfg, challengers, found, now_iso())  # approved at preflight; recorded
    costs = {n: e.train_seconds for n, e in found.challengers.items()}
    default = selection_default(cfg, challengers, found)
    where = compared_slice(cfg)
    items = (
        gate_items(cfg, ctx.workdir, ctx.run_id)
        if cfg.gate.adjudicate == "all"
        else slice_ids(cfg, where)
    )
    sealed = seal_selection(
        ledger_path(cfg),
        ctx.run_id,
        sealed_rule(cfg, ctx.run_id, challengers, default),
        where,
        items,
        now_iso(),
    )
    if cfg.gate.adjudicate == "all":
        seal_round(ctx)  # the bar too: every challenger is about to meet the gate slice
    rows = []
    for i, ch in enumerate(challengers, start=1):
        console.rule(f"[bold]challenger {ch.name}[/bold] ({i} of {len(challengers)})")
        rows.append(_run_one(ctx, ch, found, where))
    done = [r for r in rows if r.status == "done"]
    if not done:
        raise PhaseFailed(
            "every challenger failed:\n  " + "\n  ".join(f"{r.name}: {r.error}" for r in rows)
        )
    if cfg.gate.adjudicate == "all":
        rows, selected, reason, decision, alpha = _holm(ctx, rows, items)
    else:
        (rows, selected, reason, decision), alpha = _select(ctx, rows, default, costs), None
    record = PortfolioRecord(
        run_id=ctx.run_id,
        adjudicate=cfg.gate.adjudicate,
        selection_slice=where,
        rule_sha256=sealed.bar_sha256,
        sealed_at=sealed.sealed_at,
        budget=cfg.portfolio.budget.model_dump(mode="json"),
        estimate_seconds=found.train_seconds,
        estimate_usd=found.usd or 0.0,
        estimate_eval_samples=found.eval_samples,
        approval=how,
        challengers=rows,
        decision=decision,
        selected=selected,
        reason=reason,
        alpha_used=alpha,
    )
    write_record(ctx.layout.portfolio_record, record)
    ctx.notes.update(
        selected=selected, reason=reason, failed=[r.name for r in rows if r.status == "failed"]
    )


def selection_default(
    cfg: LoopConfig, challengers: list[Challenger], found: RoundEstimate
) -> str | None:
    """The default `default_stays` keeps (the marked one, else the cheapest by estimated
    training seconds); None under `best_mean` or `gate.adjudicate: all`."""
    assert cfg.portfolio is not None
    if cfg.gate.adjudicate == "all" or cfg.portfolio.selection.rule != "default_stays":
        return None
    return default_of(challengers, {n: e.train_seconds for n, e in found.challengers.items()})


def _run_one(ctx: PhaseContext, ch: Challenger, found: RoundEstimate, where: str) -> ChallengerRow:
    """One challenger's own round; a failure is recorded, not raised (interrupts are)."""
    assert ctx.nested is not None
    cfg = ctx.cfg
    run = ctx.layout.challenger(ch.name)
    base = dict(
        name=ch.name,
        overrides=ch.overrides,
        origin=ch.origin,
        recipe=recipe_of(effective_config(cfg, ch)),
        estimate=found.challengers[ch.name],
        workdir=str(run.workdir),
    )
    try:
        state: RunState = ctx.nested(challenger_config(cfg, ch, ctx.layout, where))
    except (PhaseFailed, InputError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return ChallengerRow(**base, status="failed", error=first, why="failed; skipped")
    trained, merged = state.phases["train"], state.phases["merge"]
    key = TRAINED_ADAPTER if cfg.serve.challenger == "adapter" else MERGED_MODEL
    digest = (trained if key == TRAINED_ADAPTER else merged).outputs.get(key)
    return ChallengerRow(
        **base,
        status="done",
        train_seconds=trained.duration_s,
        model_sha256=digest,
        why="",
    )


def _select(
    ctx: PhaseContext, rows: list[ChallengerRow], default: str | None, costs: dict[str, float]
) -> tuple[list[ChallengerRow], str, str, SelectionDecision | None]:
    from tuneloop.selection import compare_logs

    cfg = ctx.cfg
    assert cfg.portfolio is not None
    done = [r for r in rows if r.status == "done"]
    note = ""
    if default is not None and default not in {r.name for r in done}:
        fallback = min(done, key=lambda r: (costs[r.name], r.name)).name
        note = (
            f" (the default {default!r} failed; the cheapest that finished, {fallback!r}, stood in)"
        )
        default = fallback
    if len(done) == 1:
        only = done[0].name
        reason = f"{only!r} is the only challenger that finished{note}"
        return _mark(rows, only, reason, {}), only, reason, None
    logs = [(r.name, ctx.layout.challenger(r.name).eval_post) for r in done]
    decision = compare_logs(
        logs, cfg.portfolio.selection, default=default, costs=costs, same_model=False
    )
    means = {a.name: a.mean for a in decision.arms}
    reason = decision.reason + note
    sign_p = cfg.portfolio.selection.sign_p
    whys = {p.candidate: _pair_why(p, sign_p, decision.chosen) for p in decision.pairs}
    marked = _mark(rows, decision.chosen, reason, means, whys)
    return marked, decision.chosen, reason, decision


def _pair_why(pair: PairFigures, sign_p: float, chosen: str) -> str:
    """One challenger against the default (or, under best_mean, the best), in its own words."""
    if pair.beats_default:
        return f"beats {pair.default!r} too, but {chosen!r} ranks ahead (higher mean, then cheaper)"
    failed = []
    if pair.advantage <= 0:
        failed.append(f"advantage {pair.advantage:+.3f} is not positive")
    if pair.sign_p > sign_p:
        failed.append(f"sign-test p {pair.sign_p:.3g} > {sign_p:g}")
    inferior = [t.tag or "(untagged)" for t in pair.tags if not t.non_inferior]
    if inferior:
        failed.append("inferior on " + ", ".join(inferior))
    against = f"against {pair.default!r}: "
    return against + ("; ".join(failed) if failed else "every condition holds")


def _holm(
    ctx: PhaseContext, rows: list[ChallengerRow], items: list[str]
) -> tuple[list[ChallengerRow], str, str, SelectionDecision | None, float]:
    from tuneloop.gate import pretest
    from tuneloop.stats.selection import holm_choice

    cfg = ctx.cfg
    bar = gate_bar(cfg, ctx.run_id)  # sealed just before: the round's α (α_k under a sequence)
    done = [r for r in rows if r.status == "done"]
    pvalues, others = {}, {}
    for r in done:
        d = pretest(
            ctx.layout.eval_pre,
            ctx.layout.challenger(r.name).eval_post,
            bar=bar,
            item_ids=items,
            seed=cfg.gate.seed,
        )
        pvalues[r.name] = float(d.stats["p_value"])
        others[r.name] = all(c.passed for c in d.conditions if c.name != "significance")
    # every challenger that was sealed counts in the family, a failed one with p = 1
    family = {r.name: pvalues.get(r.name, 1.0) for r in rows}
    passes = {n: others.get(n, False) for n in family}
    # among the challengers that pass, the cheaper to serve: tokens per answer on this eval
    served = {
        r.name: mean_completion_tokens(load_sample_log(ctx.layout.challenger(r.name).eval_post)[1])
        for r in done
    }
    choice = holm_choice(family, passes, bar.alpha, {n: served.get(n) for n in family})
    thresholds = {a.name: a.threshold for a in choice.arms}
    chosen = choice.chosen
    if chosen is None:
        chosen = min(pvalues, key=lambda n: (pvalues[n], n))
        reason = (
            f"Holm rejects for no challenger at α {bar.alpha:g}; {chosen!r}, the smallest p, "
            "is adjudicated at its level"
        )
    else:
        reason = f"Holm over {len(family)} challengers: {choice.reason}"
    marked = _mark(rows, chosen, reason, {})
    marked = [r.model_copy(update={"gate_p": pvalues.get(r.name)}) for r in marked]
    return marked, chosen, reason, None, thresholds[chosen]


def _mark(
    rows: list[ChallengerRow],
    chosen: str,
    reason: str,
    means: dict[str, float],
    whys: dict[str, str] | None = None,
) -> list[ChallengerRow]:
    """The rows with the choice: selected or not, and why (a row's own figures when the
    decision has them, else the decision's reason)."""
    out = []
    for r in rows:
        own = (whys or {}).get(r.name, reason)
        why = (
            r.why
            if r.status == "failed"
            else ("selected: " + reason if r.name == chosen else "not selected: " + own)
        )
        out.append(
            r.model_copy(
                update={
                    "selected": r.name == chosen,
                    "why": why,
                    "validation_mean": means.get(r.name),
                }
            )
        )
    return out


def adopt_selected(ctx: PhaseContext) -> None:
    """The `train` phase of a portfolio round: the selected challenger's trained adapter (or
    model), copied from its own round and checked against the hash that round recorded."""
    record = read_record(ctx.layout.portfolio_record, PortfolioRecord)
    if record.selected is None:
        raise PhaseFailed(f"{ctx.layout.portfolio_record}: no challenger was selected")
    mine = ctx.layout.challenger(record.selected)
    state = load_state(mine.workdir)
    recorded = state.phases["train"].outputs.get(TRAINED_ADAPTER) if state else None
    target = ctx.folder / ADAPTER
    shutil.copytree(mine.adapter, target, symlinks=True)
    if recorded is None or sha256_path(target) != recorded:
        raise PhaseFailed(
            f"{mine.adapter} does not hash to what challenger {record.selected!r}'s training "
            "recorded; redo from challengers"
        )
    ctx.notes["adopted"] = {"challenger": record.selected, "from": str(mine.adapter)}


def portfolio_of(workdir: Path) -> PortfolioRecord | None:
    """A portfolio round's record (`challengers/selection.json`), when it has one."""
    return read_record_if_exists(RunLayout(workdir).portfolio_record, PortfolioRecord)


def adjudication_of(record: PortfolioRecord, alpha: float) -> dict[str, Any]:
    """What the verdict records of how its challenger came to be judged (`gate.adjudicate`);
    `alpha` is the round's bar's (its α_k under `gate.sequence`), which Holm splits."""
    out: dict[str, Any] = {
        "rule": record.adjudicate,
        "challengers": len(record.challengers),
        "selected": record.selected,
        "selection_sha256": record.rule_sha256,
        "alpha": alpha,
    }
    if record.alpha_used is not None:
        out["alpha_used"] = record.alpha_used
        out["p_values"] = {r.name: r.gate_p for r in record.challengers}
    return out
