"""Phase adapters: unpack `LoopConfig` into the plain arguments each phase's library takes.

One `run_<phase>(ctx)` per row of the phase table (`phases.py`). Each works only inside
`ctx.folder` and reads upstream artifacts from `ctx.upstream`; the hashes the runner already
computed for its inputs arrive in `ctx.inputs`, so no adapter hashes a model again. Phase
libraries are imported inside the adapter that needs them, so that `--plan` and `--help`
never load torch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuneloop.config import LoopConfig
from tuneloop.errors import PhaseFailed
from tuneloop.records import read_json, write_json

MERGED = "merge:merge/model"
"""The input key of the merged model (upstream phase `merge`, output `merge/model`)."""


@dataclass
class PhaseContext:
    """What a phase adapter gets: the config, its folder, upstream folders, the run id."""

    cfg: LoopConfig
    workdir: Path
    folder: Path
    run_id: str
    upstream: dict[str, Path]
    log_path: Path
    inputs: dict[str, str] = field(default_factory=dict)
    """Input name → sha256, as hashed into the phase's fingerprint."""
    notes: dict[str, Any] = field(default_factory=dict)


def model_identity(model_dir: Path, digest: str) -> str:
    return f"{model_dir.name}@sha256:{digest[:16]}"


def _evaluate_model(ctx: PhaseContext, model_dir: Path, digest: str) -> None:
    import psutil

    from tuneloop.evaluate import EvalSettings, evaluate
    from tuneloop.serve import serving

    cfg = ctx.cfg
    settings = EvalSettings(**cfg.eval.model_dump(exclude={"slice"}))
    with serving(
        model_dir,
        cfg.serve.backend,
        host=cfg.serve.host,
        port=cfg.serve.port,
        startup_timeout_s=cfg.serve.startup_timeout_s,
        log_path=ctx.folder / "server.log",
        options=cfg.serve.model_dump(mode="json"),
    ) as endpoint:
        server_pid = endpoint.pid
        summary = evaluate(
            endpoint.base_url,
            endpoint.model,
            cfg.suite.path,
            ctx.folder,
            settings,
            slice_name=cfg.eval.slice,
            slices=cfg.suite.slices,
            stratify_by_tag=cfg.suite.stratify_by_tag,
            default_scorer=cfg.suite.default_scorer,
            api_key=endpoint.api_key,
            model_identity=model_identity(model_dir, digest),
        )
    # the served model must be gone before anything else (training) starts
    ctx.notes["server_pid"] = server_pid
    ctx.notes["server_gone"] = server_pid is None or not psutil.pid_exists(server_pid)
    if not ctx.notes["server_gone"]:
        raise PhaseFailed(f"server pid {server_pid} still alive after teardown")
    ctx.notes["mean_score"] = summary.mean_score
    ctx.notes["counts"] = summary.counts


def run_eval_pre(ctx: PhaseContext) -> None:
    _evaluate_model(ctx, ctx.cfg.base_model, ctx.inputs["base_model"])


def run_eval_post(ctx: PhaseContext) -> None:
    _evaluate_model(ctx, ctx.upstream["merge"] / "model", ctx.inputs[MERGED])


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
    modules = t.lora.target_modules
    settings = TrainSettings(
        steps=t.steps,
        learning_rate=t.learning_rate,
        batch_size=t.batch_size,
        seed=t.seed,
        lora_r=t.lora.r,
        lora_alpha=t.lora.alpha,
        lora_dropout=t.lora.dropout,
        target_modules=modules if isinstance(modules, str) else tuple(modules),
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
    checks = [dataclasses.asdict(c) for c in report.checks]
    write_json(ctx.folder / "doctor.json", {"ok": report.ok, "checks": checks})
    if not report.ok:
        failed = [dataclasses.asdict(c) for c in report.failures()]
        raise PhaseFailed(f"doctor rejected the merged model: {failed}")


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
    compare(
        pre,
        post,
        ctx.folder,
        **ctx.cfg.report.model_dump(),
        item_ids=report_item_ids(ctx.cfg, evaluated),
    )


def run_gate(ctx: PhaseContext) -> None:
    from tuneloop.gate import Bar, adjudicate
    from tuneloop.gate.bar import FIELDS

    g = ctx.cfg.gate
    evaluated = set(read_json(ctx.upstream["eval_pre"] / "summary.json")["item_ids"])
    model_dir = ctx.upstream["merge"] / "model"
    archive = archive_dir(ctx.cfg, ctx.run_id)
    verdict = adjudicate(
        ctx.upstream["eval_pre"],
        ctx.upstream["eval_post"],
        bar=Bar(**g.model_dump(include=set(FIELDS))),
        slice_name=g.slice,
        item_ids=[i for i in _slice_ids(ctx.cfg, g.slice) if i in evaluated],
        ledger_path=ledger_path(ctx.cfg),
        out_dir=ctx.folder,
        run_id=ctx.run_id,
        allow_slice_reuse=g.allow_slice_reuse,
        require_approval=g.require_approval,
        challenger_descriptor={
            "kind": "single",
            "path": str(archive / "run" / "merge" / "model"),
            "sha256": ctx.inputs[MERGED],
            "model": model_identity(model_dir, ctx.inputs[MERGED]),
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
