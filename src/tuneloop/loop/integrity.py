"""Decision integrity for one round: seal the bar, refuse a second look early, promote last.

The loop's side of "a verdict belongs to its evidence" (docs/design.md):

- `seal_round` — the first thing `eval_post` does: the gate's bar, slice and items go into
  the ledger (and `eval_post/sealed_bar.json`, `RunLayout.sealed_bar`) before the challenger
  has a single number.
- `preflight_gate` — before any phase of a run executes: if the gate will have to make a new
  decision (its evidence will change, or it never decided), every item of its slice must be
  unconsumed in the ledger, and a kept post evaluation must have been sealed with the bar the
  config asks for now. Otherwise the run is refused before training, saying which slices are
  consumed and how to get fresh items.
- `check_verdict_matches` — the capstone and archive describe only the verdict whose evidence
  is this workdir's own logs.
- `run_promote` — the round's last phase: the challenger is verified in its final place (the
  archive, or the workdir when archiving is off, said so in the descriptor) and only then named
  champion in the ledger.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuneloop.config import LoopConfig
from tuneloop.errors import InputError, PhaseFailed
from tuneloop.gate.ledger import SealedBar, open_ledger
from tuneloop.gate.verdict_record import items_sha256
from tuneloop.loop.context import MERGED_MODEL, PhaseContext, model_identity
from tuneloop.loop.layout import (
    PROMOTION_FILE,
    RunLayout,
    SuiteView,
    archive_dir,
    ledger_path,
    suite_view,
)
from tuneloop.loop.state import load_state, now_iso
from tuneloop.records import read_record, write_record

if TYPE_CHECKING:
    from tuneloop.gate import Bar
    from tuneloop.gate.verdict import Evidence, GateVerdict


def gate_bar(cfg: LoopConfig) -> Bar:
    from tuneloop.gate import Bar

    return Bar.of(cfg.gate)


def gate_items(cfg: LoopConfig, workdir: Path, view: SuiteView | None = None) -> list[str]:
    """The gate slice's items that the champion's evaluation covers (all, when it exists)."""
    from tuneloop.samplelog import EvalSummary

    ids = (view or suite_view(cfg)).slices[cfg.gate.slice]
    summary = RunLayout(workdir).pre_summary
    if not summary.exists():
        return ids
    evaluated = set(read_record(summary, EvalSummary).item_ids)
    return [i for i in ids if i in evaluated]


def round_models(workdir: Path) -> tuple[str, str] | None:
    """(base model sha256, merged model sha256) as the runner recorded them, if both are."""
    state = load_state(workdir)
    if state is None:
        return None
    pre = state.phases.get("eval_pre")
    merge = state.phases.get("merge")
    base = pre.inputs.get("base_model") if pre else None
    merged = merge.outputs.get(MERGED_MODEL) if merge and merge.status == "done" else None
    return (base, merged) if base and merged else None


def round_evidence(cfg: LoopConfig, workdir: Path) -> Evidence | None:
    """The evidence the gate would judge now, or None if some of it does not exist yet."""
    from tuneloop.gate.verdict_record import make_evidence

    models = round_models(workdir)
    if models is None:
        return None
    view, run = suite_view(cfg), RunLayout(workdir)
    try:
        return make_evidence(
            (run.eval_pre, run.eval_post),
            models,
            gate_bar(cfg),
            gate_items(cfg, workdir, view),
            view.revision,
        )
    except OSError:
        return None


# ---- before any phase runs ---------------------------------------------------------------


def preflight_gate(cfg: LoopConfig, workdir: Path, upstream_unchanged: bool) -> None:
    """Refuse a run whose gate would need a second look or a moved bar (see module doc)."""
    if upstream_unchanged:
        _check_kept_seal(cfg, workdir)
        evidence = round_evidence(cfg, workdir)
        db = ledger_path(cfg)
        if evidence is not None and db.exists():
            with open_ledger(db) as ledger:
                if ledger.verdict_for_evidence(evidence.sha256()) is not None:
                    return  # the same look again: the stored verdict is reused
    if not cfg.gate.allow_slice_reuse:
        _check_fresh_items(cfg)


def _check_kept_seal(cfg: LoopConfig, workdir: Path) -> None:
    path = RunLayout(workdir).sealed_bar
    if not path.exists():
        return
    sealed = read_record(path, SealedBar)
    bar = gate_bar(cfg)
    items = items_sha256(gate_items(cfg, workdir))
    if (sealed.bar_sha256, sealed.slice, sealed.items_sha256) != (
        bar.sha256(),
        cfg.gate.slice,
        items,
    ):
        raise InputError(
            f"gate (config): the bar was sealed at {sealed.sealed_at}, before the post "
            f"evaluation, as {sealed.bar} on slice {sealed.slice!r}; the config now asks for "
            f"{bar.to_dict()} on slice {cfg.gate.slice!r}. A verdict against another bar is "
            "refused: restore the sealed gate settings, or redo the post evaluation as a new "
            "round (`--from eval_post`) on a fresh slice"
        )


def _check_fresh_items(cfg: LoopConfig) -> None:
    db = ledger_path(cfg)
    if not db.exists():
        return
    view = suite_view(cfg)
    revision, wanted = view.revision, view.slices[cfg.gate.slice]
    with open_ledger(db) as ledger:
        seen = ledger.consumed_items(revision, wanted)
        if not seen:
            return
        per_slice = {
            name: (len(ledger.consumed_items(revision, ids)), len(ids))
            for name, ids in view.slices.items()
        }
    runs = sorted({run for run, _ in seen.values()})
    consumed = ", ".join(f"{name} {n}/{total}" for name, (n, total) in per_slice.items())
    raise InputError(
        f"gate.slice (config): {len(seen)} of the {len(wanted)} items of slice "
        f"{cfg.gate.slice!r} (suite revision {revision[:12]}) were already looked at by a "
        f"verdict in {db} (runs {', '.join(runs)}). This run would need a new decision, and a "
        f"gate item is looked at once; refused before any phase ran. Consumed items per slice: "
        f"{consumed}. To decide again, add items to the suite (a new revision brings fresh "
        "items) and gate on them, or reset the one-look history on purpose with "
        f"`tuneloop ledger reset {db} --reason '...'` (recorded in the experiment log)"
    )


# ---- inside phases -------------------------------------------------------------------------


def seal_round(ctx: PhaseContext) -> SealedBar | None:
    """Seal the bar for this round before the post evaluation produces any number."""
    from tuneloop.gate.seal import seal_bar

    if not ctx.cfg.gate.enabled:
        return None
    sealed = seal_bar(
        ledger_path(ctx.cfg),
        ctx.run_id,
        gate_bar(ctx.cfg),
        ctx.cfg.gate.slice,
        gate_items(ctx.cfg, ctx.workdir),
        now_iso(),
    )
    write_record(ctx.layout.sealed_bar, sealed)
    return sealed


def read_seal(workdir: Path) -> SealedBar:
    path = RunLayout(workdir).sealed_bar
    if not path.exists():
        raise PhaseFailed(
            f"{path} is missing: the post evaluation was not sealed with a bar before it ran; "
            "redo it with `tuneloop run CONFIG --from eval_post`"
        )
    return read_record(path, SealedBar)


def check_verdict_matches(workdir: Path) -> GateVerdict:
    """The verdict in gate/, refused unless it judged exactly this workdir's two logs."""
    from tuneloop.gate.verdict_record import GateVerdict, log_sha256

    run = RunLayout(workdir)
    verdict = read_record(run.verdict, GateVerdict)
    logs = (log_sha256(run.eval_pre), log_sha256(run.eval_post))
    ev = verdict.evidence
    if ev is None or (ev.champion_log_sha256, ev.challenger_log_sha256) != logs:
        raise PhaseFailed(
            f"{run.verdict} was decided on other sample logs than this run's "
            "eval_pre/eval_post; refusing to report or archive it — redo the gate "
            "(`tuneloop run CONFIG --from gate`)"
        )
    return verdict


def run_promote(ctx: PhaseContext) -> None:
    """The round's last phase: verify the challenger in its final place, then promote."""
    from tuneloop.gate.promotion import promote

    verdict = check_verdict_matches(ctx.workdir)
    descriptor = _final_descriptor(ctx, verdict)
    result = promote(ledger_path(ctx.cfg), verdict, descriptor)
    write_record(ctx.folder / PROMOTION_FILE, result)
    ctx.notes["decision"] = result.decision
    ctx.notes["champion_version"] = result.champion_version


def _final_descriptor(ctx: PhaseContext, verdict: GateVerdict) -> dict[str, Any]:
    from tuneloop.archive import ARCHIVED_RUN_DIR, read_archived, verify_archive
    from tuneloop.records import sha256_path

    assert verdict.evidence is not None
    if ctx.cfg.archive.enabled:
        archived = read_archived(ctx.layout.archive)
        target = Path(archived.path)
        if target != archive_dir(ctx.cfg, ctx.run_id):
            raise PhaseFailed(f"archive record names {target}, not this round's archive")
        problems = verify_archive(target)
        if problems:
            raise PhaseFailed(f"archive {target} does not verify: " + "; ".join(problems[:5]))
        model = RunLayout(target / ARCHIVED_RUN_DIR).merged_model
        location = "archive (verified)"
    else:
        target, model = None, ctx.layout.merged_model
        location = "workdir: archiving is off, so this copy is not protected from a later redo"
    digest = sha256_path(model)
    if digest != verdict.evidence.challenger_model:
        raise PhaseFailed(
            f"{model} hashes to {digest[:16]}…, not the challenger the verdict judged "
            f"({verdict.evidence.challenger_model[:16]}…); the champion is unchanged"
        )
    return {
        "kind": "single",
        "path": str(model),
        "sha256": digest,
        "model": model_identity(model, digest),
        "run_id": verdict.run_id,
        "archive": str(target) if target else None,
        "location": location,
    }
