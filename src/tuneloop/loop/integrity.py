"""Decision integrity for one round: seal the bar, refuse a second look early, promote last.

The loop's side of "a verdict belongs to its evidence" (docs/design.md):

- `seal_round` — the first thing `eval_post` does: the gate's bar, slice and items go into
  the ledger (and `eval_post/sealed_bar.json`, `RunLayout.sealed_bar`) before the challenger
  has a single number.
- `preflight_gate` — before any phase of a run executes: if the gate will have to make a new
  decision (its evidence will change, or it never decided), its slice must hold fresh items
  (`tuneloop.gate.looks`: one look per item id and content, whatever the suite revision), no
  item may have changed under a consumed id unless `suite.item_changes: new`, and a kept post
  evaluation must have been sealed with the bar the config asks for now. Otherwise the run is
  refused before training, saying how many items are fresh and how many already looked at.
  Under `gate.sequence` a round the sequence would refuse (its α spent, another rule than the
  ledger's, no rule in a ledger whose sequence has begun) is refused here too.
- `gate_bar` — the round's bar: the `gate:` keys, and under `gate.sequence` its α_k
  (`tuneloop.gate.sequence.round_bar`); the seal, the gate and the evidence hash all use it.
- `gate_items` — what the gate judges: the slice's items the champion's evaluation covers,
  less those an earlier verdict looked at (all of them only with `gate.allow_slice_reuse`);
  `next_gate_items`, the same for the next run (what the preflight power warning counts).
- `check_verdict_matches` — the capstone and archive describe only the verdict whose evidence
  is this workdir's own logs.
- `run_promote` — the round's last phase: the challenger is verified in its final place (the
  archive, or the workdir when archiving is off, said so in the descriptor) and only then named
  champion in the ledger.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuneloop.config import LoopConfig, SuiteConfig
from tuneloop.errors import InputError, PhaseFailed
from tuneloop.gate.ledger import SealedBar, open_ledger
from tuneloop.gate.looks import Advice, SliceLooks, changed_message, classify, refusal
from tuneloop.loop.cascade import CHAMPION_CASCADE, cascade_champion
from tuneloop.loop.context import (
    COMPOSED_CASCADE,
    MERGED_MODEL,
    TRAINED_ADAPTER,
    PhaseContext,
    challenger_descriptor,
)
from tuneloop.loop.layout import (
    PROMOTION_FILE,
    RunLayout,
    SuiteView,
    archive_dir,
    ledger_path,
    suite_view,
)
from tuneloop.loop.portfolio import round_recipe
from tuneloop.loop.state import load_state, now_iso
from tuneloop.records import read_record, write_record
from tuneloop.samplelog import items_sha256

if TYPE_CHECKING:
    from tuneloop.config.models import Challenger
    from tuneloop.gate import Bar
    from tuneloop.gate.verdict import Evidence, GateVerdict


def gate_bar(cfg: LoopConfig, seal_id: str | None) -> Bar:
    """The bar round `seal_id` is sealed and judged with: the `gate:` keys and, under
    `gate.sequence`, its α_k — the k it was sealed at, or the next round's when it is not
    sealed yet (`seal_id` None: the next new round). Refuses a round the sequence would
    refuse (`tuneloop.gate.sequence.round_bar`)."""
    from tuneloop.gate.sequence import round_bar

    return round_bar(cfg.gate, cfg.gate.sequence, ledger_path(cfg), seal_id)


def round_seal_id(workdir: Path) -> str | None:
    """The seal id of the round in `workdir`: its kept seal's (a round whose gate is redone
    under a new run id is still judged against the bar it sealed), else its run id."""
    path = RunLayout(workdir).sealed_bar
    if path.exists():
        return read_record(path, SealedBar).seal_id
    return _run_id(workdir)


def gate_items(
    cfg: LoopConfig, workdir: Path, run_id: str | None, view: SuiteView | None = None
) -> list[str]:
    """The gate slice's items that the champion's evaluation covers (all, when it exists) and
    no verdict but run `run_id`'s own looked at (every one, with `gate.allow_slice_reuse`)."""
    from tuneloop.samplelog import EvalSummary

    view = view or suite_view(cfg)
    ids = view.slices[cfg.gate.slice]
    summary = RunLayout(workdir).pre_summary
    if summary.exists():
        evaluated = set(read_record(summary, EvalSummary).item_ids)
        ids = [i for i in ids if i in evaluated]
    if cfg.gate.allow_slice_reuse:
        return ids
    return slice_looks(cfg, view, ids, except_run=run_id).judgeable(_changes_are_new(cfg))


def next_gate_items(cfg: LoopConfig) -> list[str]:
    """What a new decision would judge: the gate slice's fresh items, every look counted, as
    `preflight_gate` counts them (all of them with `gate.allow_slice_reuse`). The preflight
    power warning counts these."""
    view = suite_view(cfg)
    ids = view.slices[cfg.gate.slice]
    if cfg.gate.allow_slice_reuse:
        return ids
    return slice_looks(cfg, view, ids).judgeable(_changes_are_new(cfg))


def slice_looks(
    cfg: LoopConfig, view: SuiteView, ids: list[str], except_run: str | None = None
) -> SliceLooks:
    """`ids` by one-look status in the ledger (all fresh when there is no ledger yet: the file
    is not created); an item renewed with `tuneloop ledger renew` to its content now is fresh."""
    db = ledger_path(cfg)
    if not db.exists():
        return classify(view.contents(ids), {})
    with open_ledger(db) as ledger:
        looks = ledger.item_looks(ids, except_run=except_run)
        renewed = ledger.renewed_items(ids)
    return classify(view.contents(ids), looks, renewed)


def _changes_are_new(cfg: LoopConfig) -> bool:
    return cfg.suite.item_changes == "new"


def _run_id(workdir: Path) -> str | None:
    state = load_state(workdir)
    return state.run_id if state else None


def round_models(workdir: Path, challenger: Challenger = "merged") -> tuple[str, str] | None:
    """(base model sha256, challenger sha256) as the runner recorded them, if both are. The
    challenger is what answered the post arm (`serve.challenger`): the merged model, the
    trained adapter served on the base, or the composed cascade's descriptor."""
    state = load_state(workdir)
    if state is None:
        return None
    pre = state.phases.get("eval_pre")
    phase, key = {
        "merged": ("merge", MERGED_MODEL),
        "adapter": ("train", TRAINED_ADAPTER),
        "cascade": ("compose", COMPOSED_CASCADE),
    }[challenger]
    made = state.phases.get(phase)
    # the pre arm: the base, or a cascade champion's descriptor (a round from a cascade)
    base = (pre.inputs.get(CHAMPION_CASCADE) or pre.inputs.get("base_model")) if pre else None
    post = made.outputs.get(key) if made and made.status == "done" else None
    return (base, post) if base and post else None


def check_served(workdir: Path, models: tuple[str, str]) -> None:
    """Each arm's log says it was answered by the artifact the gate is about to judge (its
    summary's `served_as.artifact`, `tuneloop.samplelog.ServedArtifact`); PhaseFailed if not."""
    from tuneloop.samplelog import EvalSummary

    run = RunLayout(workdir)
    for arm, path, digest in (
        ("pre", run.pre_summary, models[0]),
        ("post", run.post_summary, models[1]),
    ):
        served = read_record(path, EvalSummary).served_as
        artifact = served.artifact if served is not None else None
        if artifact is not None and artifact.sha256 != digest:
            raise PhaseFailed(
                f"{path}: the {arm} arm was answered by {artifact.kind} {artifact.path} "
                f"({artifact.sha256[:16]}…), not the {digest[:16]}… this round judges; redo "
                f"from eval_{arm}"
            )


def round_evidence(cfg: LoopConfig, workdir: Path) -> Evidence | None:
    """The evidence the gate would judge now, or None if some of it does not exist yet."""
    from tuneloop.gate.verdict_record import make_evidence

    models = round_models(workdir, cfg.serve.challenger)
    if models is None:
        return None
    view, run = suite_view(cfg), RunLayout(workdir)
    try:
        return make_evidence(
            (run.eval_pre, run.eval_post),
            models,
            gate_bar(cfg, round_seal_id(workdir)),
            gate_items(cfg, workdir, _run_id(workdir), view),
            view.revision,
        )
    except OSError:
        return None


# ---- before any phase runs ---------------------------------------------------------------


def preflight_gate(cfg: LoopConfig, workdir: Path, upstream_unchanged: bool) -> None:
    """Refuse a run whose gate would need a second look, a moved bar or more α than the
    sequence gives it (see module doc)."""
    gate_bar(cfg, _run_id(workdir))  # the sequence's refusals, before anything trains
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
    bar = gate_bar(cfg, sealed.seal_id)
    items = items_sha256(gate_items(cfg, workdir, _run_id(workdir)))
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


def changed_items_problem(
    cfg: LoopConfig, view: SuiteView | None = None, status: SliceLooks | None = None
) -> str | None:
    """What is wrong when items of the gate slice changed content under an id a verdict
    already looked at and `suite.item_changes` is `refuse`; None when nothing is (or there
    is no ledger yet). Also a `tuneloop check` finding (`loop.preflight`)."""
    db = ledger_path(cfg)
    if _changes_are_new(cfg) or not db.exists():
        return None
    view = view or suite_view(cfg)
    status = status or slice_looks(cfg, view, view.slices[cfg.gate.slice])
    if not status.changed:
        return None
    return changed_message(status, _where(cfg, view), db, _suite_args(cfg), Advice())


def _suite_args(cfg: LoopConfig) -> str:
    """The suite as `tuneloop ledger renew` needs it: path, and a default scorer not its own
    (the content hash covers each item's effective scorer)."""
    scorer = cfg.suite.default_scorer
    same = scorer == SuiteConfig.model_fields["default_scorer"].default
    return str(cfg.suite.path) + ("" if same else f" --default-scorer {scorer}")


def _where(cfg: LoopConfig, view: SuiteView) -> str:
    return f"slice {cfg.gate.slice!r} (suite revision {view.revision[:12]})"


def _check_fresh_items(cfg: LoopConfig) -> None:
    """The one refusal `tuneloop gate` gives too (`tuneloop.gate.looks.refusal`)."""
    db = ledger_path(cfg)
    if not db.exists():
        return
    view = suite_view(cfg)
    problem = refusal(
        slice_looks(cfg, view, view.slices[cfg.gate.slice]),
        where=_where(cfg, view),
        ledger=db,
        suite=_suite_args(cfg),
        changes_are_new=_changes_are_new(cfg),
        min_items=cfg.gate.min_items,
    )
    if problem:
        key, message = problem
        raise InputError(f"{key} (config): {message}")


# ---- inside phases -------------------------------------------------------------------------


def seal_round(ctx: PhaseContext) -> SealedBar | None:
    """Seal the bar for this round before the post evaluation produces any number."""
    from tuneloop.gate.seal import seal_bar

    if not ctx.cfg.gate.enabled:
        return None
    sealed = seal_bar(
        ledger_path(ctx.cfg),
        ctx.run_id,
        gate_bar(ctx.cfg, ctx.run_id),
        ctx.cfg.gate.slice,
        gate_items(ctx.cfg, ctx.workdir, ctx.run_id),
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
    from tuneloop.gate.verdict_record import GateVerdict
    from tuneloop.samplelog import log_sha256

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
    """The champion as promoted: the artifact the verdict judged, hashed again in its final
    place (the verified archive, or the workdir when archiving is off). With
    `serve.challenger: adapter` that is the adapter, and the base it was served on must still
    be the champion's own weights; the merged model rides along for the next round to train
    from (`loop.rounds.lineage`)."""
    from tuneloop.archive import ARCHIVED_RUN_DIR, read_archived, verify_archive
    from tuneloop.records import sha256_path

    assert verdict.evidence is not None
    if ctx.cfg.archive.enabled:
        archived = read_archived(ctx.layout.archive)
        target: Path | None = Path(archived.path)
        if target != archive_dir(ctx.cfg, ctx.run_id):
            raise PhaseFailed(f"archive record names {target}, not this round's archive")
        problems = verify_archive(target)
        if problems:
            raise PhaseFailed(f"archive {target} does not verify: " + "; ".join(problems[:5]))
        run = RunLayout(target / ARCHIVED_RUN_DIR)
        location = "archive (verified)"
    else:
        target, run = None, ctx.layout
        location = "workdir: archiving is off, so this copy is not protected from a later redo"
    if ctx.cfg.serve.challenger == "cascade":  # the cascade as judged, its tier archived
        digest = sha256_path(run.cascade)
        _same_as_judged(run.cascade, digest, verdict.evidence.challenger_model)
        descriptor = cascade_champion(run.cascade, run.merged_model, verdict.run_id)
        return descriptor | {"archive": str(target) if target else None, "location": location}
    adapter = ctx.cfg.serve.challenger == "adapter"
    judged = run.adapter if adapter else run.merged_model
    digest = sha256_path(judged)
    _same_as_judged(judged, digest, verdict.evidence.challenger_model)
    merged_sha = digest
    if adapter:  # served on the base: the base must still be the weights it was served on
        _same_as_judged(ctx.cfg.base, sha256_path(ctx.cfg.base), verdict.evidence.champion_model)
        recorded = round_models(ctx.workdir)  # the merged model rides along by its record
        if recorded is None:
            raise PhaseFailed("the round's merged model hash is not recorded; redo from merge")
        merged_sha = recorded[1]
    descriptor = challenger_descriptor(
        ctx.cfg,
        (run.merged_model, merged_sha),
        (run.adapter, digest) if adapter else None,
        base_sha256=verdict.evidence.champion_model,
        run_id=verdict.run_id,
        recipe=round_recipe(ctx.cfg, ctx.workdir),
    )
    return descriptor | {"archive": str(target) if target else None, "location": location}


def _same_as_judged(path: Path, digest: str, judged: str) -> None:
    if digest != judged:
        raise PhaseFailed(
            f"{path} hashes to {digest[:16]}…, not what the verdict judged "
            f"({judged[:16]}…); the champion is unchanged"
        )
