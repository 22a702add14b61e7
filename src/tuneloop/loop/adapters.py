"""Phase adapters: unpack `LoopConfig` into the plain arguments each phase's library takes.

One `run_<phase>(ctx)` per row of the phase table (`phases.py`). Each works only inside
`ctx.folder` and reads upstream artifacts where the run's layout puts them (`ctx.layout`);
the hashes the runner already computed for its inputs arrive in `ctx.inputs`, so no adapter
hashes a model again. Phase libraries are imported inside the adapter that needs them, so
that `--plan` and `--help` never load torch.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from pathlib import Path
from typing import Any, Literal

from tuneloop.config import LoopConfig, TrainConfig
from tuneloop.errors import PhaseFailed
from tuneloop.loop.cascade import CHAMPION_CASCADE, cascade_champion, champion_cascade
from tuneloop.loop.context import (
    COMPOSED,
    MERGED,
    TRAINED,
    PhaseContext,
    challenger_descriptor,
    decoding_contract,
    model_identity,
)
from tuneloop.loop.corpus_data import (
    bands_serve_base,
    composite_hint_rows,
    composite_pairs,
    corpus_file,
    corpus_output,
    decontaminate_replay,
    decontaminated_given,
    earlier_call_logs,
    loop_suites,
    output_phase,
    replay_traces,
)
from tuneloop.loop.handover import archive_recipe, capstone_inputs, not_archived, recorded_hash
from tuneloop.loop.integrity import (
    check_served,
    check_verdict_matches,
    gate_bar,
    gate_items,
    read_seal,
    round_models,
    seal_round,
)
from tuneloop.loop.layout import (
    ADAPTER,
    CAPSTONE_FILE,
    DOCTOR_FILE,
    MODEL,
    RunLayout,
    archive_dir,
    ledger_path,
    slice_ids,
    suite_view,
)
from tuneloop.loop.portfolio import round_recipe
from tuneloop.loop.portfolio.run import adjudication_of, adopt_selected, portfolio_of
from tuneloop.loop.state import RunState
from tuneloop.loop.warmup import AFTER_WARMUP, WARMUP_STEP, evaluates_warmup
from tuneloop.records import read_record, write_json, write_record
from tuneloop.records.composition import CompositionRecord


def _evaluate_model(
    ctx: PhaseContext,
    model_dir: Path,
    digest: str,
    arm: Literal["pre", "post"],
    adapter: tuple[Path, str] | None = None,
) -> None:
    """Serve `model_dir` (with `adapter`, `(folder, sha256)`, on it) and evaluate it as `arm`;
    the summary records what answered, by hash and as the server listed it (`ServedAs`)."""
    import psutil

    from tuneloop.evaluate import evaluate
    from tuneloop.samplelog import SUMMARY_FILE, ServedArtifact, ServedAs
    from tuneloop.serving import listed_model, serving

    cfg = ctx.cfg
    decoding = decoding_contract(cfg)
    served_dir, served_sha = adapter if adapter is not None else (model_dir, digest)
    with serving(
        model_dir,
        cfg.serve,
        log_path=ctx.folder / "server.log",
        arm=arm,
        decoding=decoding,
        adapter=adapter[0] if adapter is not None else None,
    ) as endpoint:
        server_pid = endpoint.pid
        if decoding is not None and not endpoint.decoding_applied:
            raise PhaseFailed(
                f"serve backend {cfg.serve.backend!r} did not apply the decoding contract "
                "(stop token ids); pre and post would not be served alike"
            )
        summary = evaluate(
            [endpoint.base_url, *endpoint.replicas],
            endpoint.model,
            cfg.suite.path,
            ctx.folder,
            cfg.eval,
            slicing=cfg.suite,
            api_key=endpoint.api_key,
            # an external arm is the model it names, never the local checkpoint
            model_identity=endpoint.identity or model_identity(served_dir, served_sha),
        )
        artifact = None
        if endpoint.identity is None:  # local weights (an external arm names its model)
            artifact = ServedArtifact(
                kind="adapter" if adapter is not None else "model",
                path=str(served_dir),
                sha256=served_sha,
                base_sha256=digest if adapter is not None else None,
                served_id=endpoint.model,
                reported=listed_model(endpoint),
            )
    served = ServedAs(
        arm=arm,
        backend=cfg.serve.backend,
        stop_token_ids=list(decoding.stop_token_ids) if decoding is not None else None,
        aa_control=cfg.serve.external.aa_control,
        artifact=artifact,
    )
    summary = summary.model_copy(update={"served_as": served})
    write_record(ctx.folder / SUMMARY_FILE, summary)
    # the served model must be gone before anything else (training) starts
    ctx.notes["server_pid"] = server_pid
    ctx.notes["server_gone"] = server_pid is None or not psutil.pid_exists(server_pid)
    if not ctx.notes["server_gone"]:
        raise PhaseFailed(f"server pid {server_pid} still alive after teardown")
    ctx.notes["mean_score"] = summary.mean_score
    ctx.notes["counts"] = summary.counts


def run_eval_pre(ctx: PhaseContext) -> None:
    champion = champion_cascade(ctx.cfg)
    if champion is not None:  # a cascade champion's round: the pre arm is the cascade itself
        _evaluate_model(ctx, champion, ctx.inputs[CHAMPION_CASCADE], "pre")
    else:
        _evaluate_model(ctx, ctx.cfg.base, ctx.inputs["base_model"], "pre")


def run_eval_warmup(ctx: PhaseContext) -> None:
    """The SFT warm-up's adapter, merged on the base for the length of its evaluation
    (`loop.warmup`)."""
    import shutil

    from tuneloop.records import sha256_tree
    from tuneloop.train.checkpoint import merge

    warm = ctx.layout.warmup_adapter
    if not (warm / "adapter_config.json").is_file():
        raise PhaseFailed(
            f"{warm}: the warm-up's adapter is missing (the train phase keeps it for GRPO and "
            "composite LoRA runs with train.sft_warmup_steps > 0); redo from train"
        )
    model = ctx.folder / "warmup_model"
    shutil.rmtree(model, ignore_errors=True)
    try:
        merge(ctx.cfg.base, warm, model, min_change=ctx.cfg.merge.min_change)
        _evaluate_model(ctx, model, sha256_tree(model), "post")
    finally:
        shutil.rmtree(model, ignore_errors=True)


def run_eval_post(ctx: PhaseContext) -> None:
    seal_round(ctx)  # the bar is fixed before the challenger has a single number
    if ctx.cfg.serve.challenger == "cascade":  # the composed cascade, the merged model a tier
        _evaluate_model(ctx, ctx.layout.cascade, ctx.inputs[COMPOSED], "post")
    elif ctx.cfg.serve.challenger == "adapter":  # the adapter on the base, never merged
        adapter = (ctx.layout.adapter, ctx.inputs[TRAINED])
        _evaluate_model(ctx, ctx.cfg.base, ctx.inputs["base_model"], "post", adapter)
    else:
        _evaluate_model(ctx, ctx.layout.merged_model, ctx.inputs[MERGED], "post")


def run_data(ctx: PhaseContext) -> None:
    from tuneloop.data.corpus import build_corpus

    cfg = ctx.cfg
    assert cfg.data.corpus is not None
    build = partial(build_corpus, cfg.data.corpus, ctx.folder, extra_suites=loop_suites(cfg))
    if bands_serve_base(cfg):  # bands by the base's pass rate: serve it while sampling
        from tuneloop.serving import serving

        log = ctx.folder / "server.log"
        with serving(
            cfg.base, cfg.serve, log_path=log, arm="pre", decoding=decoding_contract(cfg)
        ) as endpoint:
            result = build(champion=endpoint)
        ctx.notes["banded_by"] = {"model": str(cfg.base), "sha256": ctx.inputs["base_model"]}
    else:
        result = build()
    ctx.notes["counts"] = result.counts
    if result.sft_path != ctx.layout.corpus_rows:
        raise PhaseFailed(f"corpus build wrote {result.sft_path}, expected sft.jsonl")
    if ctx.cfg.train.data is None and output_phase(corpus_output(ctx.cfg)) == "data":
        corpus_file(ctx.cfg, ctx.folder)  # the output training reads: there, and not empty


def run_replay(ctx: PhaseContext) -> None:
    from tuneloop.replay import replay

    cfg = ctx.cfg
    assert cfg.replay.teachers is not None
    traces = replay_traces(cfg, ctx.layout, ctx.folder)
    earlier = earlier_call_logs(ctx.workdir)
    result = replay(traces, cfg.replay.teachers, ctx.folder, cfg.replay, earlier=earlier)
    r = result.report
    ctx.notes.update(calls_this_run=r.calls_this_run, calls_reused=r.calls_reused)
    ctx.notes["reused_from"] = r.reused_from
    ctx.notes["teachers"] = {
        t.name: {"pass_rate": t.pass_rate, "scored": t.scored, "cost_usd": t.cost_usd}
        for t in r.teachers
    }
    ctx.notes.update(sft_rows=r.sft_rows, dpo_pairs=r.dpo_pairs, cost_usd=r.cost_usd)
    ctx.notes["contaminated"] = decontaminate_replay(cfg, ctx.folder)
    # fail here, not after two more phases, when training would read nothing
    if cfg.train.data is None and output_phase(corpus_output(cfg)) == "replay":
        corpus_file(cfg, ctx.folder)
    pairs = composite_pairs(cfg, ctx.layout)
    empty = pairs is not None and pairs.parent == ctx.folder and pairs.stat().st_size == 0
    if cfg.train.method == "composite" and empty:
        raise PhaseFailed(
            f"the replay wrote no preference pairs ({pairs}) for replay-DPO "
            f"(train.composite.beta {cfg.train.composite.beta}); see "
            f"{ctx.folder / 'report.md'}: pairs need one teacher to pass a step another fails"
        )


def train_data(cfg: LoopConfig, run: RunLayout) -> Path:
    if cfg.train.data is not None:
        return cfg.train.data
    return corpus_file(cfg, run.phase(output_phase(corpus_output(cfg))))


def train_settings(cfg: LoopConfig, run: RunLayout) -> TrainConfig:
    """`train:` with composite's replay-DPO pairs and self-distillation hints resolved (the
    replay phase's by default)."""
    c = cfg.train.composite
    resolved = {"pairs": composite_pairs(cfg, run), "hint_rows": composite_hint_rows(cfg, run)}
    if resolved == {"pairs": c.pairs, "hint_rows": c.hint_rows}:
        return cfg.train
    return cfg.train.model_copy(update={"composite": c.model_copy(update=resolved)})


def run_train(ctx: PhaseContext) -> None:
    from tuneloop.train.run import train

    if ctx.cfg.portfolio is not None:  # the challenger the sealed rule chose, as trained
        adopt_selected(ctx)
        return
    # given files, matched against the suites; the corpus build's and the replay's already are
    given = decontaminated_given(ctx.cfg, ctx.folder)
    data = given.get("data") or train_data(ctx.cfg, ctx.layout)
    settings = train_settings(ctx.cfg, ctx.layout)
    if "pairs" in given:
        composite = settings.composite.model_copy(update={"pairs": given["pairs"]})
        settings = settings.model_copy(update={"composite": composite})
    if "sft_warmup_data" in given:
        settings = settings.model_copy(update={"sft_warmup_data": given["sft_warmup_data"]})
    train(
        ctx.cfg.base,
        data,
        ctx.folder / ADAPTER,
        settings,
        suite_paths=[ctx.cfg.suite.path],
        default_scorer=ctx.cfg.suite.default_scorer,
    )


def run_merge(ctx: PhaseContext) -> None:
    from tuneloop.train.checkpoint import merge

    adapter = None if ctx.cfg.merge.zero_adapter else ctx.layout.adapter
    merge(ctx.cfg.base, adapter, ctx.folder / MODEL, min_change=ctx.cfg.merge.min_change)


def run_doctor(ctx: PhaseContext) -> None:
    from tuneloop.train.checkpoint import doctor_arms

    report = doctor_arms(ctx.cfg.base, ctx.layout.merged_model)
    cmp = report.comparison
    agreement = _adapter_agreement(ctx) if report.ok else None
    write_json(
        ctx.folder / DOCTOR_FILE,
        {
            "ok": report.ok,
            "agreement": agreement,
            "checks": [dataclasses.asdict(c) for c in report.merged.checks],
            "base": {
                "ok": report.base.ok,
                "checks": [dataclasses.asdict(c) for c in report.base.checks],
            },
            "decoding": {
                **dataclasses.asdict(report.decoding),
                "stop_token_ids": list(cmp.stop_token_ids) if cmp else None,
                "fixed": cmp.fixed if cmp else [],
                "problems": cmp.problems if cmp else [],
            },
        },
    )
    if not report.ok:
        failed = [
            f"{arm} {c.name}: {c.detail}"
            for arm, checked in (("merged", report.merged), ("base", report.base))
            for c in checked.failures()
        ] + ([] if report.decoding.ok else [f"decoding: {report.decoding.detail}"])
        raise PhaseFailed("doctor rejected the round:\n  " + "\n  ".join(failed))


def _adapter_agreement(ctx: PhaseContext) -> dict[str, Any] | None:
    """With `serve.challenger: adapter`: how the adapter served on the base answers against the
    merged model (`loop.served_agreement`), for doctor.json; None when not asked for."""
    cfg = ctx.cfg
    if cfg.serve.challenger != "adapter" or cfg.merge.agreement_items == 0:
        return None
    from tuneloop.loop.served_agreement import served_agreement

    run = ctx.layout
    found = served_agreement(cfg, run.merged_model, run.adapter, ctx.folder, decoding_contract(cfg))
    ctx.notes["agreement"] = found.line()
    return {
        "compared": found.compared,
        "same": found.same,
        "unpaired": found.unpaired,
        "line": found.line(),
        "differing": [dataclasses.asdict(d) for d in found.differing],
    }


def report_item_ids(cfg: LoopConfig, evaluated: list[str]) -> list[str]:
    """The report looks at every evaluated item except the gate slice (looked at once)."""
    if not cfg.gate.enabled:
        return evaluated
    held = set(slice_ids(cfg, cfg.gate.slice))
    return [i for i in evaluated if i not in held]


def run_report(ctx: PhaseContext) -> None:
    from tuneloop.report import compare
    from tuneloop.samplelog import EvalSummary

    run = ctx.layout
    evaluated = read_record(run.pre_summary, EvalSummary).item_ids
    items = report_item_ids(ctx.cfg, evaluated)
    compare(run.eval_pre, run.eval_post, ctx.folder, ctx.cfg.report, item_ids=items)
    if evaluates_warmup(ctx.cfg):  # what each training step added, on the same items
        warm = run.eval_warmup
        for pre, post, name in (
            (run.eval_pre, warm, WARMUP_STEP),
            (warm, run.eval_post, AFTER_WARMUP),
        ):
            compare(pre, post, ctx.folder / name, ctx.cfg.report, item_ids=items, figures=False)


def run_gate(ctx: PhaseContext) -> None:
    from tuneloop.gate import adjudicate
    from tuneloop.loop.preflight.judge import judge_note

    g, run = ctx.cfg.gate, ctx.layout
    challenger = ctx.cfg.serve.challenger
    models = round_models(ctx.workdir, challenger)
    judged = ctx.inputs[{"adapter": TRAINED, "merged": MERGED, "cascade": COMPOSED}[challenger]]
    if models is None or models[1] != judged:
        raise PhaseFailed("the round's model hashes are not recorded; redo from eval_pre")
    check_served(ctx.workdir, models)
    view = suite_view(ctx.cfg)
    items = gate_items(ctx.cfg, ctx.workdir, ctx.run_id, view)
    # where the challenger is now; `promote` names its final, verified place
    if challenger == "cascade":
        descriptor = cascade_champion(run.cascade, run.merged_model, ctx.run_id)
    else:
        descriptor = challenger_descriptor(
            ctx.cfg,
            (run.merged_model, ctx.inputs[MERGED]),
            (run.adapter, judged) if challenger == "adapter" else None,
            base_sha256=models[0],
            run_id=ctx.run_id,
            recipe=round_recipe(ctx.cfg, ctx.workdir),
        )
    portfolio = portfolio_of(ctx.workdir)
    composed = read_record(run.composition, CompositionRecord) if challenger == "cascade" else None
    sealed = read_seal(ctx.workdir)
    bar = gate_bar(ctx.cfg, sealed.seal_id)  # the sealed round's (its α_k under gate.sequence)
    verdict = adjudicate(
        run.eval_pre,
        run.eval_post,
        bar=bar,
        slice_name=g.slice,
        item_ids=items,
        ledger_path=ledger_path(ctx.cfg),
        out_dir=ctx.folder,
        run_id=ctx.run_id,
        allow_slice_reuse=g.allow_slice_reuse,
        require_approval=g.require_approval,
        challenger_descriptor=descriptor,
        seed=ctx.cfg.gate.seed,
        models=models,
        sealed=sealed,
        promote=False,
        contents={i: view.hashes[i] for i in items},
        changes_are_new=ctx.cfg.suite.item_changes == "new",
        adjudication=adjudication_of(portfolio, bar.alpha) if portfolio is not None else None,
        portfolio=portfolio,
        composition=composed,
        judge=judge_note(ctx.cfg),
    )
    ctx.notes["decision"] = verdict.decision
    ctx.notes["verdict_run_id"] = verdict.run_id


def run_capstone(ctx: PhaseContext) -> None:
    from tuneloop.report.capstone import write_capstone

    verdict = check_verdict_matches(ctx.workdir) if ctx.cfg.gate.enabled else None
    state = read_record(ctx.layout.state, RunState)
    inputs = capstone_inputs(ctx.cfg, ctx.layout, state)
    write_capstone(ctx.folder / CAPSTONE_FILE, ctx.cfg, state, inputs, verdict)


def run_archive(ctx: PhaseContext) -> None:
    from tuneloop.archive import ARCHIVED_FILE, Archived, archive_run
    from tuneloop.records import sha256_path

    # capstone (upstream) has checked that the verdict judged this workdir's logs
    target = archive_dir(ctx.cfg, ctx.run_id)
    state = read_record(ctx.layout.state, RunState)
    base = recorded_hash(state, "eval_pre", "base_model") or sha256_path(ctx.cfg.base)
    manifest = archive_run(
        ctx.workdir,
        target,
        state,
        archive_recipe(ctx.cfg),
        base_model_sha256=base,
        skip=not_archived(ctx.folder),
    )
    record = Archived(path=str(target), manifest_sha256=manifest, run_id=ctx.run_id)
    write_record(ctx.folder / ARCHIVED_FILE, record)
    ctx.notes["archive"] = str(target)
