"""Adjudicate one round: logs + bar + slice → verdict, ledger rows, experiment-log entry.

This is the thin I/O shell around `tuneloop.gate.rule.decide`. Order of work, chosen so that a
refusal changes nothing and a crash never leaves a half-recorded round:

1. read and align both logs (refuse incomparable logs, and unpriced ones when the bar has a
   cost condition: `InputError`, exit 2);
2. hash the evidence — both logs' bytes, both models, the bar, the slice's item ids — and
   return the stored verdict if the ledger already holds one for exactly this evidence (a
   resumed round: the same look, not a second one);
3. check the sealed bar, when one was sealed (`tuneloop.gate.seal`);
4. refuse a slice any of whose items an earlier verdict looked at — under any suite
   revision, by id and content hash (`tuneloop.gate.looks`) — unless reuse is allowed, and an
   item changed under a consumed id unless it is declared new (nothing written);
5. apply the pure rule, and the bar's cost condition when it sets one (`tuneloop.gate.cost`);
6. in one ledger transaction: the consumed items with their content hashes, the item
   changes declared new, the α a round never sealed spends under a sequence rule
   (`tuneloop.gate.sequence.spend_alpha`; a sealed round spent it at its seal), the verdict
   and — only when `promote=True`
   (the standalone `tuneloop gate`, whose artifact is whatever the caller names) — the new
   champion version. The loop promotes later, after the artifact is archived and verified
   (`tuneloop.gate.promotion.promote`);
7. write `out_dir/verdict.json` atomically and append the `EXPERIMENT-LOG.md` entries (the
   verdict, and the item changes it judged as new items).

A verdict is never reused for other evidence: a run id that already has a verdict on other
logs, models or bar is refused ("a changed run is a new round").
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuneloop.errors import InputError
from tuneloop.gate.arms import Arm, load_arms
from tuneloop.gate.bar import Bar
from tuneloop.gate.champion import parse_descriptor
from tuneloop.gate.cost import cost_conditions, judge_cost
from tuneloop.gate.explog import append_entry, cascade_round, log_path, verdict_entry
from tuneloop.gate.ledger import (
    Champion,
    Consumption,
    ItemChange,
    Ledger,
    SealedBar,
    open_ledger,
)
from tuneloop.gate.looks import classify, counts, name_ids
from tuneloop.gate.rule import Decision, decide, item_scores
from tuneloop.gate.seal import check_seal
from tuneloop.gate.sequence import spend_alpha
from tuneloop.gate.verdict_record import (
    ArmSummary,
    ConditionResult,
    CostResult,
    Evidence,
    GateVerdict,
    JudgeNote,
    Outcome,
    SliceReuse,
    make_evidence,
)
from tuneloop.records import write_record
from tuneloop.records.cascade_table import CascadeRound
from tuneloop.records.composition import CompositionRecord
from tuneloop.records.selection import PortfolioRecord

VERDICT_FILE = "verdict.json"


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def adjudicate(
    champion_log: Path,
    challenger_log: Path,
    *,
    bar: Bar,
    slice_name: str,
    item_ids: list[str],
    ledger_path: Path,
    out_dir: Path,
    run_id: str,
    allow_slice_reuse: bool = False,
    require_approval: bool = False,
    challenger_descriptor: dict[str, Any] | None = None,
    seed: int = 0,
    bar_registered_at: str | None = None,
    models: tuple[str, str] | None = None,
    sealed: SealedBar | None = None,
    promote: bool = True,
    contents: dict[str, str] | None = None,
    changes_are_new: bool = False,
    adjudication: dict[str, Any] | None = None,
    portfolio: PortfolioRecord | None = None,
    composition: CompositionRecord | None = None,
    judge: JudgeNote | None = None,
) -> GateVerdict:
    """Decide champion vs challenger on a fresh slice; record and return the verdict.

    `models` are the (champion, challenger) model hashes; `sealed` the bar sealed before the
    challenger's evaluation; `contents` each item's content hash (`SuiteItem.content_sha256`;
    without one a look is recorded by id alone), and `changes_are_new` judges an item changed
    under a consumed id as a new item (`suite.item_changes: new`). A portfolio round passes
    its `adjudication` (recorded in the verdict; its `alpha_used` is the α the decision is made
    at, the Holm level of this challenger under `gate.adjudicate: all`, while the bar sealed
    and hashed stays the nominal one) and its challenger table (`portfolio`, for the
    experiment log's entry); a cascade round its `composition`, which the entry shows with
    the tiers' answers and both arms' cost on the slice. A slice scored by an LLM judge passes
    the judge's calibration (`judge`), recorded beside the Δ with the Δ it corresponds to.
    Raises `InputError` (exit 2, nothing
    written) for incomparable logs, unpriced logs under a bar with a cost condition, a bad
    descriptor, a bar other than the sealed one, a run id already judged on other evidence,
    consumed items without `allow_slice_reuse`, or changed items not declared new.
    """
    champ, chall = load_arms(champion_log, challenger_log, item_ids, bar.scorer)
    _check_k(bar, champ)
    cost = _cost(champ, chall, bar)
    descriptor = _descriptor(challenger_descriptor, chall, run_id)
    cascade = (
        cascade_round(composition, champion_log, challenger_log, item_ids)
        if composition is not None
        else None
    )
    evidence = make_evidence(
        (Path(champion_log), Path(challenger_log)),
        models or (champ.summary.model, chall.summary.model),
        bar,
        item_ids,
        champ.summary.suite_revision,
    )
    with open_ledger(ledger_path) as ledger:
        stored = _stored_verdict(ledger, evidence, run_id)
        if stored is not None:
            _write_outputs(stored, ledger_path, out_dir, portfolio, cascade)
            return stored
        if sealed is not None:
            check_seal(sealed, bar, slice_name, item_ids, ledger)
        looks = _Looks(contents, allow_slice_reuse, changes_are_new)
        previous, changes = looks.check(ledger, slice_name, evidence, item_ids, run_id)
        alpha = (adjudication or {}).get("alpha_used")
        decision = _decide(champ, chall, bar if alpha is None else _at(bar, alpha), seed, cost)
        with ledger.transaction():
            # Re-check inside the write lock: another process may have looked meanwhile.
            previous, changes = looks.check(ledger, slice_name, evidence, item_ids, run_id)
            verdict = _verdict(
                decision,
                champ,
                chall,
                bar=bar,
                slice_name=slice_name,
                items_hash=evidence.items_sha256,
                run_id=run_id,
                require_approval=require_approval,
                descriptor=descriptor,
                previous=previous,
                seed=seed,
                champion=ledger.current_champion(),
            )
            verdict.bar_registered_at = bar_registered_at
            verdict.warnings = preregistration_warnings(
                sealed.sealed_at if sealed else bar_registered_at, chall.summary.started_at
            )
            verdict.evidence, verdict.evidence_sha256 = evidence, evidence.sha256()
            verdict.item_ids = sorted(item_ids)
            verdict.sealed_at = sealed.sealed_at if sealed else None
            verdict.adjudication = adjudication
            verdict.cost = cost
            costs = (champ.summary.judge_cost_usd, chall.summary.judge_cost_usd)
            verdict.judge = judge and judge.beside(decision.stats.get("delta"), costs)
            if sealed is None:  # never sealed (`tuneloop gate`): its α is spent with its verdict
                spend_alpha(ledger, run_id, bar, verdict.decided_at)
            _record(ledger, verdict, bool(previous), promote, contents)
            ledger.add_item_changes(changes)
    _write_outputs(verdict, ledger_path, out_dir, portfolio, cascade)
    if changes:
        append_entry(log_path(ledger_path), f"item changes {run_id}", changes_entry(changes))
    return verdict


def pretest(
    champion_log: Path, challenger_log: Path, *, bar: Bar, item_ids: list[str], seed: int = 0
) -> Decision:
    """The rule on two logs, nothing recorded: what a portfolio round under
    `gate.adjudicate: all` reads for every challenger before Holm picks the one its verdict
    then records (the bar and the procedure sealed before any challenger was evaluated)."""
    champ, chall = load_arms(champion_log, challenger_log, item_ids, bar.scorer)
    _check_k(bar, champ)
    return _decide(champ, chall, bar, seed, _cost(champ, chall, bar))


def _stored_verdict(ledger: Ledger, evidence: Evidence, run_id: str) -> GateVerdict | None:
    """The verdict that judged exactly this evidence (a resumed round), or None.

    A run id that already has a verdict on other evidence is refused: a verdict belongs to
    what it judged, and a changed run is a new round with a new run id.
    """
    stored = ledger.verdict_for_evidence(evidence.sha256())
    if stored is not None:
        return stored
    other = ledger.verdict(run_id)
    if other is not None:
        raise InputError(
            f"run {run_id!r} already has a verdict in {ledger.path} (decided "
            f"{other.decided_at}: {other.decision}) on other evidence — other logs, "
            "models, bar or items. A verdict is never reused for evidence it did not judge: "
            "a changed run is a new round (`tuneloop run` starts one) with a new run id"
        )
    return None


def preregistration_warnings(bar_at: str | None, post_started_at: str | None) -> list[str]:
    """A warning when the bar was fixed after the challenger's evaluation began.

    Deliberately a warning, not a condition: file times move when files are copied or checked
    out, so they are evidence for a reviewer, not proof to refuse on.
    """
    if not bar_at or not post_started_at:
        return []
    try:
        bar_t, post_t = (
            dt.datetime.fromisoformat(t.replace("Z", "+00:00")) for t in (bar_at, post_started_at)
        )
        late = bar_t > post_t
    except (ValueError, TypeError):
        return [f"could not compare bar time {bar_at!r} with eval start {post_started_at!r}"]
    if not late:
        return []
    return [
        f"the bar was fixed at {bar_at}, after the challenger's evaluation started at "
        f"{post_started_at}: it was not pre-registered"
    ]


def _descriptor(given: dict[str, Any] | None, chall: Arm, run_id: str) -> dict[str, Any]:
    data = given if given is not None else {"kind": "single", "model": chall.summary.model}
    data = {"run_id": run_id, **data}
    return parse_descriptor(data, "challenger descriptor").model_dump(mode="json")


@dataclass(frozen=True)
class _Looks:
    """The one-look check of one adjudication (`tuneloop.gate.looks`)."""

    contents: dict[str, str] | None
    allow_reuse: bool
    changes_are_new: bool

    def check(
        self, ledger: Ledger, slice_name: str, evidence: Evidence, item_ids: list[str], run: str
    ) -> tuple[list[Consumption], list[ItemChange]]:
        """Refuse items looked at before (since the last reset, under any suite revision)
        unless reuse is allowed, and changed ones unless declared new; return the earlier
        looks to record as reuse and the item changes to record."""
        revision = evidence.suite_revision
        hashes = self.contents or {}
        status = classify(
            {i: hashes.get(i) for i in item_ids},
            ledger.item_looks(item_ids),
            ledger.renewed_items(item_ids),
        )
        if status.changed and not self.changes_are_new and not self.allow_reuse:
            ids = sorted(status.changed)
            raise InputError(
                f"gate slice {slice_name!r} (suite {revision[:12]}): {len(ids)} item(s) changed "
                f"content under an id a verdict already looked at: {name_ids(ids)}. Restore "
                "them, give them new ids, or declare them new items (suite.item_changes: new)"
            )
        seen = status.consumed
        previous = ledger.consumptions(slice_name, revision, evidence.items_sha256)
        if seen and not self.allow_reuse:
            runs = sorted({look.run_id for look in seen.values()})
            first_at = min(look.consumed_at for look in seen.values())
            raise InputError(
                f"gate slice {slice_name!r} (suite {revision[:12]}): {len(seen)} of its "
                f"{len(item_ids)} items were already looked at by a verdict (runs "
                f"{', '.join(runs)}; first at {first_at}; {counts(status)}). A gate item is "
                "looked at once, whatever the suite revision. Gate on items with new ids, or pass "
                "--allow-slice-reuse (gate.allow_slice_reuse), which the verdict records"
            )
        if seen and not previous:
            # reuse of individual items under another slice: still record who looked before
            previous = [
                Consumption(slice_name, revision, "", len(seen), run_id, at, True)
                for run_id, at in sorted({(x.run_id, x.consumed_at) for x in seen.values()})
            ]
        changes: list[ItemChange] = []
        if self.changes_are_new:
            at = now()
            changes = [
                ItemChange(
                    i,
                    look.content_sha256,
                    hashes[i],
                    revision,
                    run,
                    at,
                    "declared new with suite.item_changes: new (tuneloop gate --item-changes new)",
                )
                for i, look in status.changed.items()
            ]
        return previous, changes


def changes_entry(changes: list[ItemChange]) -> str:
    """The EXPERIMENT-LOG entry of items judged as new under a consumed id."""
    first = changes[0]
    lines = [
        f"## {first.declared_at} — {len(changes)} changed item(s) judged as new items "
        f"(run {first.run_id})",
        "",
        f"- Reason: {first.reason}",
        f"- Suite revision: {first.suite_revision[:12]}",
    ]
    for c in changes:
        old = c.old_sha256[:12] if c.old_sha256 else "(no hash: an old look)"
        lines.append(f"- `{c.item_id}`: content {old} → {c.new_sha256[:12]}")
    return "\n".join(lines) + "\n"


def _check_k(bar: Bar, champ: Arm) -> None:
    k_max = champ.summary.sampling.n_samples
    if bar.metric == "pass_at_k" and bar.k > k_max:
        raise InputError(f"bar: k = {bar.k} but the logs have only {k_max} samples per item")


def _at(bar: Bar, alpha: float) -> Bar:
    """The bar with the α a multiple adjudication leaves this challenger (Holm, over the
    round's α — under a sequence rule its α_k); the condition then names that α alone."""
    return Bar.model_validate(bar.model_dump(exclude={"sequence"}) | {"alpha": alpha})


def _cost(champ: Arm, chall: Arm, bar: Bar) -> CostResult | None:
    """The bar's cost condition on both arms (None: the bar sets none); refuses unpriced logs."""
    return judge_cost(champ.costs, chall.costs, bar.cost) if bar.cost is not None else None


def _decide(champ: Arm, chall: Arm, bar: Bar, seed: int, cost: CostResult | None) -> Decision:
    decision = decide(
        item_scores(champ.scores, bar.metric, bar.k),
        item_scores(chall.scores, bar.metric, bar.k),
        bar=bar,
        tags=[t or c for t, c in zip(chall.tags, champ.tags, strict=True)],
        missing=(champ.missing_fraction, chall.missing_fraction),
        seed=seed,
    )
    return decision if cost is None else decision.extended(cost_conditions(cost))


def _arm(arm: Arm, mean: float | None) -> ArmSummary:
    return ArmSummary(
        log=str(arm.log),
        model=arm.summary.model,
        mean=mean,
        unscored=arm.unscored,
        missing_fraction=arm.missing_fraction,
    )


def _verdict(
    decision: Decision,
    champ: Arm,
    chall: Arm,
    *,
    bar: Bar,
    slice_name: str,
    items_hash: str,
    run_id: str,
    require_approval: bool,
    descriptor: dict[str, Any],
    previous: list[Consumption],
    seed: int,
    champion: Champion | None,
) -> GateVerdict:
    outcome: Outcome = "reject"
    if decision.promote:
        outcome = "awaiting_approval" if require_approval else "promote"
    reuse = None
    if previous:
        reuse = SliceReuse(
            previous_runs=[p.run_id for p in previous],
            previous_at=[p.consumed_at for p in previous],
        )
    return GateVerdict(
        run_id=run_id,
        decided_at=now(),
        decision=outcome,
        reasons=decision.reasons,
        conditions=[ConditionResult(**vars(c)) for c in decision.conditions],
        stats=decision.stats,
        bar=bar.to_dict(),
        bar_sha256=bar.sha256(),
        slice=slice_name,
        suite_revision=champ.summary.suite_revision,
        items_sha256=items_hash,
        sampling=champ.summary.sampling.model_dump(mode="json"),
        champion=_arm(champ, decision.stats["champion_mean"]),
        challenger=_arm(chall, decision.stats["challenger_mean"]),
        champion_version=champion.version if champion else None,
        challenger_descriptor=descriptor,
        slice_reuse=reuse,
        seed=seed,
    )


def _record(
    ledger: Ledger,
    verdict: GateVerdict,
    reused: bool,
    promote: bool,
    contents: dict[str, str] | None,
) -> None:
    """Consumption (slice and items), verdict and, if asked, the new champion — inside the
    caller's transaction."""
    ledger.consume(
        Consumption(
            verdict.slice,
            verdict.suite_revision,
            verdict.items_sha256,
            len(verdict.item_ids),
            verdict.run_id,
            verdict.decided_at,
            reused,
        ),
    )
    ledger.consume_items(
        verdict.suite_revision, verdict.item_ids, verdict.run_id, verdict.decided_at, contents
    )
    if promote:
        assert verdict.challenger_descriptor is not None
        ledger.add_promotable(verdict.run_id, verdict.challenger_descriptor, verdict.decided_at)
        verdict.promoted = True
        if verdict.decision == "promote":
            verdict.new_champion_version = ledger.add_champion(
                verdict.challenger_descriptor,
                run_id=verdict.run_id,
                at=verdict.decided_at,
                via="gate",
            )
    ledger.add_verdict(verdict)


def _write_outputs(
    verdict: GateVerdict,
    ledger_path: Path,
    out_dir: Path,
    portfolio: PortfolioRecord | None,
    cascade: CascadeRound | None,
) -> None:
    write_record(Path(out_dir) / VERDICT_FILE, verdict)
    entry = verdict_entry(verdict.to_json(), portfolio, cascade)
    append_entry(log_path(ledger_path), f"verdict {verdict.run_id}", entry)
