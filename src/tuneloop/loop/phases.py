"""The phase table: the only place that knows the order of the loop.

    data? → eval_pre → train → merge → doctor → eval_post → report → gate → capstone → archive

Each phase declares its inputs (upstream phases and external files, hashed into its
fingerprint), its config subset, and the outputs it must leave in its own folder under the
workdir. The adapters below unpack `LoopConfig` into the plain arguments each phase's
library takes; phases never import each other, and none of them knows what comes next.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuneloop.config import LoopConfig
from tuneloop.errors import PhaseFailed
from tuneloop.records import read_json, sha256_path, write_json


@dataclass
class PhaseContext:
    """What a phase adapter gets: the config, its folder, upstream folders, the run id."""

    cfg: LoopConfig
    workdir: Path
    folder: Path
    run_id: str
    upstream: dict[str, Path]
    log_path: Path
    notes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Phase:
    name: str
    run: Callable[[PhaseContext], None]
    outputs: tuple[str, ...]
    """Paths relative to the phase folder that must exist (and are hashed) after `run`."""
    after: tuple[str, ...] = ()
    """Upstream phases whose outputs are this phase's inputs."""
    files: Callable[[LoopConfig], dict[str, Path]] = lambda cfg: {}
    """External input files or folders, hashed into the fingerprint."""
    config: Callable[[LoopConfig], Any] = lambda cfg: None
    """The config subset that changes this phase's result."""
    enabled: Callable[[LoopConfig], bool] = lambda cfg: True
    resumable: bool = False
    """Keep the folder's partial contents on redo (the eval resumes missing samples)."""


# ---- adapters -------------------------------------------------------------------------------


def _serve_options(cfg: LoopConfig) -> dict[str, Any]:
    s = cfg.serve
    if s.backend == "vllm":
        return s.vllm.model_dump()
    if s.backend == "external":
        return s.external.model_dump()
    return {
        "max_batch_size": s.max_batch_size,
        "batch_wait_ms": s.batch_wait_ms,
        "max_tokens_cap": s.max_tokens_cap,
        "api_key_env": s.api_key_env,
    }


def model_identity(model_dir: Path) -> str:
    return f"{model_dir.name}@sha256:{sha256_path(model_dir)[:16]}"


def _evaluate_model(ctx: PhaseContext, model_dir: Path) -> None:
    import psutil

    from tuneloop.evaluate import EvalSettings, evaluate
    from tuneloop.serve import serving

    cfg = ctx.cfg
    e = cfg.eval
    settings = EvalSettings(
        n_samples=e.n_samples,
        temperature=e.temperature,
        top_p=e.top_p,
        max_tokens=e.max_tokens,
        seed=e.seed,
        concurrency=e.concurrency,
        max_retries=e.max_retries,
        request_timeout_s=e.request_timeout_s,
    )
    with serving(
        model_dir,
        cfg.serve.backend,
        host=cfg.serve.host,
        port=cfg.serve.port,
        startup_timeout_s=cfg.serve.startup_timeout_s,
        log_path=ctx.folder / "server.log",
        options=_serve_options(cfg),
    ) as endpoint:
        server_pid = endpoint.pid
        summary = evaluate(
            endpoint.base_url,
            endpoint.model,
            cfg.suite.path,
            ctx.folder,
            settings,
            slice_name=e.slice,
            slices=cfg.suite.slices,
            stratify_by_tag=cfg.suite.stratify_by_tag,
            default_scorer=cfg.suite.default_scorer,
            api_key=endpoint.api_key,
            model_identity=model_identity(model_dir),
        )
    # the served model must be gone before anything else (training) starts
    ctx.notes["server_pid"] = server_pid
    ctx.notes["server_gone"] = server_pid is None or not psutil.pid_exists(server_pid)
    if not ctx.notes["server_gone"]:
        raise PhaseFailed(f"server pid {server_pid} still alive after teardown")
    ctx.notes["mean_score"] = summary.mean_score
    ctx.notes["counts"] = summary.counts


def run_eval_pre(ctx: PhaseContext) -> None:
    _evaluate_model(ctx, ctx.cfg.base_model)


def run_eval_post(ctx: PhaseContext) -> None:
    _evaluate_model(ctx, ctx.upstream["merge"] / "model")


def run_data(ctx: PhaseContext) -> None:
    from tuneloop.data import build_corpus

    assert ctx.cfg.data.corpus is not None
    result = build_corpus(ctx.cfg.data.corpus, ctx.folder)
    ctx.notes["counts"] = result.counts
    if result.sft_path != ctx.folder / "sft.jsonl":
        raise PhaseFailed(f"corpus build wrote {result.sft_path}, expected sft.jsonl")


def train_data(cfg: LoopConfig, upstream: dict[str, Path]) -> Path:
    if cfg.train.data is not None:
        return cfg.train.data
    return upstream["data"] / "sft.jsonl"


def run_train(ctx: PhaseContext) -> None:
    from tuneloop.train import TrainSettings, train

    t = ctx.cfg.train
    settings = TrainSettings(
        steps=t.steps,
        learning_rate=t.learning_rate,
        batch_size=t.batch_size,
        seed=t.seed,
        lora_r=t.lora.r,
        lora_alpha=t.lora.alpha,
        lora_dropout=t.lora.dropout,
        target_modules=(
            t.lora.target_modules
            if isinstance(t.lora.target_modules, str)
            else tuple(t.lora.target_modules)
        ),
        group_size=t.grpo.group_size,
        beta=t.grpo.beta,
        loss_type=t.grpo.loss_type,
        max_completion_length=t.grpo.max_completion_length,
        temperature=t.grpo.temperature,
        reward_scorer=t.grpo.scorer,
        sft_warmup_steps=t.sft_warmup_steps,
        sft_warmup_batch_size=t.sft_warmup_batch_size,
        sft_warmup_learning_rate=t.sft_warmup_learning_rate,
        torch_threads=t.torch_threads,
        dpo_beta=t.dpo_beta,
    )
    train(
        t.method,
        ctx.cfg.base_model,
        train_data(ctx.cfg, ctx.upstream),
        ctx.folder / "adapter",
        settings,
        suite_paths=[ctx.cfg.suite.path],
        allow_contamination=t.allow_contamination,
        default_scorer=ctx.cfg.suite.default_scorer,
        nproc=t.nproc,
    )


def run_merge(ctx: PhaseContext) -> None:
    from tuneloop.train import merge

    adapter = None if ctx.cfg.merge.zero_adapter else ctx.upstream["train"] / "adapter"
    merge(ctx.cfg.base_model, adapter, ctx.folder / "model")


def run_doctor(ctx: PhaseContext) -> None:
    from tuneloop.train import doctor

    report = doctor(ctx.upstream["merge"] / "model")
    checks = [_plain(c) for c in report.checks]
    write_json(ctx.folder / "doctor.json", {"ok": report.ok, "checks": checks})
    if not report.ok:
        failed = [c for c in checks if not c.get("ok", True)]
        raise PhaseFailed(f"doctor rejected the merged model: {failed}")


def _plain(obj: Any) -> dict[str, Any]:
    if hasattr(obj, "model_dump"):
        return dict(obj.model_dump(mode="json"))
    if hasattr(obj, "__dataclass_fields__"):
        import dataclasses

        return dataclasses.asdict(obj)
    return dict(obj)


def _slice_ids(cfg: LoopConfig, name: str) -> list[str]:
    from tuneloop.suite import load_suite, slice_ids

    suite = load_suite(cfg.suite.path, cfg.suite.default_scorer)
    return slice_ids(suite, cfg.suite.slices, name, stratify_by_tag=cfg.suite.stratify_by_tag)


def report_item_ids(cfg: LoopConfig, evaluated: list[str]) -> list[str]:
    """The report looks at every evaluated item except the gate slice (looked at once)."""
    if not cfg.gate.enabled:
        return evaluated
    held = set(_slice_ids(cfg, cfg.gate.slice))
    return [i for i in evaluated if i not in held]


def run_report(ctx: PhaseContext) -> None:
    from tuneloop.report import compare

    pre, post = ctx.upstream["eval_pre"], ctx.upstream["eval_post"]
    evaluated = read_json(pre / "summary.json")["item_ids"]
    r = ctx.cfg.report
    compare(
        pre,
        post,
        ctx.folder,
        confidence=r.confidence,
        n_resamples=r.n_resamples,
        permutation_resamples=r.permutation_resamples,
        seed=r.seed,
        item_ids=report_item_ids(ctx.cfg, evaluated),
    )


def run_gate(ctx: PhaseContext) -> None:
    from tuneloop.gate import Bar, adjudicate

    g = ctx.cfg.gate
    bar = Bar(
        metric=g.metric,
        k=g.k,
        margin=g.margin,
        alpha=g.alpha,
        test=g.test,
        non_inferiority_epsilon=g.non_inferiority_epsilon,
        min_items=g.min_items,
        max_missing_fraction=g.max_missing_fraction,
    )
    evaluated = set(read_json(ctx.upstream["eval_pre"] / "summary.json")["item_ids"])
    item_ids = [i for i in _slice_ids(ctx.cfg, g.slice) if i in evaluated]
    model_dir = ctx.upstream["merge"] / "model"
    archive = archive_dir(ctx.cfg, ctx.run_id)
    verdict = adjudicate(
        ctx.upstream["eval_pre"],
        ctx.upstream["eval_post"],
        bar=bar,
        slice_name=g.slice,
        item_ids=item_ids,
        ledger_path=ledger_path(ctx.cfg),
        out_dir=ctx.folder,
        run_id=ctx.run_id,
        allow_slice_reuse=g.allow_slice_reuse,
        require_approval=g.require_approval,
        challenger_descriptor={
            "kind": "single",
            "path": str(archive / "run" / "merge" / "model"),
            "sha256": sha256_path(model_dir),
            "model": model_identity(model_dir),
            "run_id": ctx.run_id,
            "archive": str(archive),
        },
        seed=ctx.cfg.report.seed,
    )
    ctx.notes["decision"] = verdict.decision


def archive_root(cfg: LoopConfig) -> Path:
    return cfg.archive.root or cfg.workdir.parent / "archive"


def archive_dir(cfg: LoopConfig, run_id: str) -> Path:
    return archive_root(cfg) / run_id


def ledger_path(cfg: LoopConfig) -> Path:
    return cfg.gate.ledger or archive_root(cfg) / "ledger.db"


def run_capstone(ctx: PhaseContext) -> None:
    from tuneloop.loop.capstone import write_capstone

    write_capstone(ctx.cfg, ctx.workdir, ctx.upstream, ctx.folder / "report.md")


def run_archive(ctx: PhaseContext) -> None:
    from tuneloop.archive import archive_run

    target = archive_dir(ctx.cfg, ctx.run_id)
    manifest = archive_run(ctx.workdir, target, ctx.cfg)
    write_json(ctx.folder / "archived.json", {"path": str(target), "manifest_sha256": manifest})
    ctx.notes["archive"] = str(target)


# ---- the table ----------------------------------------------------------------------------


def _eval_config(cfg: LoopConfig) -> Any:
    return {
        "backend": cfg.serve.backend,
        "eval": cfg.eval.model_dump(mode="json"),
        "suite": cfg.suite.model_dump(mode="json", exclude={"path"}),
    }


EVAL_OUT = ("samples.jsonl", "summary.json")

PHASES: tuple[Phase, ...] = (
    Phase(
        "data",
        run_data,
        outputs=("sft.jsonl", "provenance.json"),
        files=lambda c: {"corpus_config": c.data.corpus} if c.data.corpus else {},
        enabled=lambda c: c.data.corpus is not None,
    ),
    Phase(
        "eval_pre",
        run_eval_pre,
        outputs=EVAL_OUT,
        files=lambda c: {"base_model": c.base_model, "suite": c.suite.path},
        config=_eval_config,
        resumable=True,
    ),
    Phase(
        "train",
        run_train,
        outputs=("adapter",),
        after=("data",),
        files=lambda c: (
            {"base_model": c.base_model, "suite": c.suite.path}
            | ({"data": c.train.data} if c.train.data else {})
        ),
        config=lambda c: c.train.model_dump(mode="json", exclude={"data"}),
        enabled=lambda c: not c.merge.zero_adapter,
    ),
    Phase(
        "merge",
        run_merge,
        outputs=("model",),
        after=("train",),
        files=lambda c: {"base_model": c.base_model},
        config=lambda c: c.merge.model_dump(mode="json"),
    ),
    Phase("doctor", run_doctor, outputs=("doctor.json",), after=("merge",)),
    Phase(
        "eval_post",
        run_eval_post,
        outputs=EVAL_OUT,
        after=("merge", "doctor"),
        files=lambda c: {"suite": c.suite.path},
        config=_eval_config,
        resumable=True,
    ),
    Phase(
        "report",
        run_report,
        outputs=("delta.json", "delta.md", "passk.png", "items.png"),
        after=("eval_pre", "eval_post"),
        config=lambda c: {
            "report": c.report.model_dump(mode="json"),
            "held_out": c.gate.slice if c.gate.enabled else None,
            "slices": c.suite.slices,
        },
    ),
    Phase(
        "gate",
        run_gate,
        outputs=("verdict.json",),
        after=("eval_pre", "eval_post", "merge", "report"),
        config=lambda c: {
            "gate": c.gate.model_dump(mode="json", exclude={"ledger"}),
            "slices": c.suite.slices,
        },
        enabled=lambda c: c.gate.enabled,
    ),
    Phase(
        "capstone",
        run_capstone,
        outputs=("report.md",),
        after=("eval_pre", "train", "merge", "doctor", "eval_post", "report", "gate"),
    ),
    Phase(
        "archive",
        run_archive,
        outputs=("archived.json",),
        after=("capstone",),
        config=lambda c: c.archive.model_dump(mode="json"),
        enabled=lambda c: c.archive.enabled,
    ),
)

PHASE_NAMES = tuple(p.name for p in PHASES)
