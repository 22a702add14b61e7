"""Adjudicate one round: logs + bar + slice → verdict, ledger rows, experiment-log entry.

This is the thin I/O shell around `tuneloop.gate.rule.decide`. Order of work, chosen so that a
refusal changes nothing and a crash never leaves a half-recorded round:

1. read and align both logs (refuse incomparable logs: `InputError`, exit 2);
2. refuse a consumed slice unless reuse is allowed (nothing written);
3. apply the pure rule;
4. in one ledger transaction: the slice consumption, the verdict, and — on promote — the new
   champion version;
5. write `out_dir/verdict.json` atomically and append the `EXPERIMENT-LOG.md` entry.

If the process dies after 4, running the same `run_id` again finds its verdict in the ledger
and only re-writes the files of step 5 (the loop resumes a phase by re-running it).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from tuneloop.errors import InputError
from tuneloop.gate import explog, ledger
from tuneloop.gate.arms import Arm, load_arms
from tuneloop.gate.bar import Bar
from tuneloop.gate.champion import parse_descriptor
from tuneloop.gate.rule import Decision, decide, item_scores
from tuneloop.records import Record, canonical_json, parse_record, sha256_bytes, write_record

VERDICT_FILE = "verdict.json"
Outcome = Literal["promote", "reject", "awaiting_approval"]


class ArmSummary(BaseModel):
    """One arm as the verdict reports it."""

    log: str
    """The sample-log folder."""
    model: str
    """Model identity from the log's summary."""
    mean: float | None
    """Mean item score on the bar's metric over the slice."""
    unscored: int
    """(item, sample) keys without a scored completion."""
    missing_fraction: float
    """unscored / (items × samples)."""


class ConditionResult(BaseModel):
    """One condition of the rule (see `tuneloop.gate.rule`)."""

    name: str
    """Condition name."""
    passed: bool
    """Whether it held."""
    detail: str
    """The numbers and the threshold, in words."""
    values: dict[str, Any] = {}
    """The numbers, for machines."""


class SliceReuse(BaseModel):
    """Present when the slice had been consumed before and reuse was explicitly allowed."""

    previous_runs: list[str]
    """Runs that looked at this slice earlier."""
    previous_at: list[str]
    """When they looked."""


class GateVerdict(Record):
    """The outcome of one gate round."""

    KIND = "verdict"
    VERSION = 1

    run_id: str
    """The run being adjudicated."""
    decided_at: str
    """ISO-8601 UTC time of the decision."""
    decision: Outcome
    """promote, reject, or awaiting_approval (the rule said promote; approval is required)."""
    reasons: list[str]
    """Every failed condition, in words (empty unless rejected)."""
    conditions: list[ConditionResult]
    """Every condition with the numbers behind it."""
    stats: dict[str, Any]
    """n_items, arm means, delta, p_value, one-sided lower bound, wins/losses/ties."""
    bar: dict[str, Any]
    """The bar the round was judged against."""
    bar_sha256: str
    """Hash of the bar's canonical JSON."""
    slice: str
    """The gate slice's name."""
    suite_revision: str
    """The suite revision both logs were evaluated on."""
    items_sha256: str
    """Hash of the slice's sorted item ids (the slice's identity in the ledger)."""
    sampling: dict[str, Any]
    """The shared sampling budget of both logs."""
    champion: ArmSummary
    challenger: ArmSummary
    champion_version: int | None
    """Ledger champion version in service when the round was decided (None: none yet)."""
    new_champion_version: int | None = None
    """The version created by this promotion, if any."""
    challenger_descriptor: dict[str, Any] | None = None
    """What becomes the champion on promotion."""
    slice_reuse: SliceReuse | None = None
    """Set when the slice had been consumed before and reuse was allowed."""
    seed: int = 0
    """Seed of the permutation test and bootstrap."""
    bar_registered_at: str | None = None
    """When the bar was fixed (bar file mtime, or config time), as the caller reported it."""
    warnings: list[str] = []
    """Things a reviewer should know that do not change the decision (e.g. a bar fixed after
    the challenger's evaluation started)."""


def items_sha256(item_ids: list[str]) -> str:
    return sha256_bytes(canonical_json(sorted(item_ids)).encode())


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
) -> GateVerdict:
    """Decide champion vs challenger on a fresh slice; record and return the verdict.

    Raises `InputError` (exit 2, nothing written) for incomparable logs, a bad descriptor,
    or a consumed slice without `allow_slice_reuse`.
    """
    champ, chall = load_arms(champion_log, challenger_log, item_ids)
    _check_k(bar, champ)
    descriptor = _descriptor(challenger_descriptor, chall, run_id)
    revision = champ.summary.suite_revision
    items_hash = items_sha256(item_ids)
    conn = ledger.connect(ledger_path)
    try:
        stored = _stored_verdict(conn, run_id, items_hash, ledger_path)
        if stored is not None:
            _write_outputs(stored, ledger_path, out_dir)
            return stored
        previous = _check_slice(conn, slice_name, revision, items_hash, allow_slice_reuse)
        decision = _decide(champ, chall, bar, seed)
        with ledger.transaction(conn):
            # Re-check inside the write lock: another process may have looked meanwhile.
            previous = _check_slice(conn, slice_name, revision, items_hash, allow_slice_reuse)
            verdict = _verdict(
                decision,
                champ,
                chall,
                bar=bar,
                slice_name=slice_name,
                items_hash=items_hash,
                run_id=run_id,
                require_approval=require_approval,
                descriptor=descriptor,
                previous=previous,
                seed=seed,
                champion=ledger.current_champion(conn),
            )
            verdict.bar_registered_at = bar_registered_at
            verdict.warnings = preregistration_warnings(bar_registered_at, chall.summary.started_at)
            _record(conn, verdict, len(item_ids), bool(previous))
    finally:
        conn.close()
    _write_outputs(verdict, ledger_path, out_dir)
    return verdict


def _stored_verdict(
    conn: Any, run_id: str, items_hash: str, ledger_path: Path
) -> GateVerdict | None:
    """The verdict this run already has on this slice (a resumed phase), or None."""
    stored = ledger.verdict(conn, run_id)
    if stored is None:
        return None
    if stored["items_sha256"] != items_hash:
        raise InputError(
            f"run {run_id!r} already has a verdict in {ledger_path} on slice "
            f"{stored['slice']!r}; a run is adjudicated once — use a new run id"
        )
    return parse_record(stored, GateVerdict, f"{ledger_path} (run {run_id})")


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


def _check_slice(
    conn: Any, slice_name: str, revision: str, items_hash: str, allow: bool
) -> list[ledger.Consumption]:
    previous = ledger.consumptions(conn, slice_name, revision, items_hash)
    if previous and not allow:
        first = previous[0]
        raise InputError(
            f"slice {slice_name!r} (suite {revision[:12]}) was already consumed by run "
            f"{first.run_id!r} at {first.consumed_at}; a gate slice is looked at once. "
            "Use a fresh slice, or pass --allow-slice-reuse (gate.allow_slice_reuse), "
            "which is recorded in the verdict"
        )
    return previous


def _check_k(bar: Bar, champ: Arm) -> None:
    k_max = champ.summary.sampling.n_samples
    if bar.metric == "pass_at_k" and bar.k > k_max:
        raise InputError(f"bar: k = {bar.k} but the logs have only {k_max} samples per item")


def _decide(champ: Arm, chall: Arm, bar: Bar, seed: int) -> Decision:
    return decide(
        item_scores(champ.scores, bar.metric, bar.k),
        item_scores(chall.scores, bar.metric, bar.k),
        bar=bar,
        tags=[t or c for t, c in zip(chall.tags, champ.tags, strict=True)],
        missing=(champ.missing_fraction, chall.missing_fraction),
        seed=seed,
    )


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
    previous: list[ledger.Consumption],
    seed: int,
    champion: dict[str, Any] | None,
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
        champion_version=champion["version"] if champion else None,
        challenger_descriptor=descriptor,
        slice_reuse=reuse,
        seed=seed,
    )


def _record(conn: Any, verdict: GateVerdict, n_items: int, reused: bool) -> None:
    """Consumption, new champion (on promote) and verdict — inside the caller's transaction."""
    ledger.consume(
        conn,
        ledger.Consumption(
            verdict.slice,
            verdict.suite_revision,
            verdict.items_sha256,
            n_items,
            verdict.run_id,
            verdict.decided_at,
            reused,
        ),
    )
    if verdict.decision == "promote":
        assert verdict.challenger_descriptor is not None
        verdict.new_champion_version = ledger.add_champion(
            conn,
            verdict.challenger_descriptor,
            run_id=verdict.run_id,
            at=verdict.decided_at,
            via="gate",
        )
    ledger.add_verdict(conn, verdict.to_json())


def _write_outputs(verdict: GateVerdict, ledger_path: Path, out_dir: Path) -> None:
    write_record(Path(out_dir) / VERDICT_FILE, verdict)
    data = verdict.to_json()
    explog.append_entry(
        explog.log_path(ledger_path), f"verdict {verdict.run_id}", explog.verdict_entry(data)
    )
