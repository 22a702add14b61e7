"""The phase table: the only place that knows the order of the loop.

    data? → replay? → eval_pre → challengers? → train → merge → doctor → eval_warmup?
          → compose? → eval_post → report → gate → capstone → archive → promote → track?

`challengers` (on with `portfolio:`, `loop.portfolio`) trains and compares a set of
challengers, each in a round of its own (`CHALLENGER_PHASES`), under a selection rule it seals
first; `train` then takes the selected one's adapter instead of training.

`compose` (on with `serve.challenger: cascade`, `loop.cascade`) evaluates each tier of the
`cascade:` section alone on a validation slice — the merged model is its trained tier —
composes the cascade offline, seals the choice and writes the descriptor the post arm serves.

`eval_warmup` (on when GRPO or composite LoRA training warms up with SFT,
`train.sft_warmup_steps`) serves the warm-up's own adapter merged on the base and evaluates it
like the arms, so that the report can say what each step added (`loop.warmup`).
`replay` (on when `replay.teachers` is set) sends the data phase's traces, or
`replay.traces`, to the teachers; training reads its rows or pairs (`loop.corpus_data`). The
gate decides; `promote` — after the archive verifies — is the only phase that
changes the champion, so a crash anywhere in between leaves the old champion in charge.
`track` (on when `tracking.mlflow` is set, `loop.track`) mirrors the decided round into
MLflow; its failure never fails the run, and its `retry` hook writes again on the next run.

Each phase declares its inputs (upstream phases and external files, hashed into its
fingerprint), its config subset, and the outputs it must leave in its own folder under the
workdir (`<workdir>/<name>/`; `layout.RunLayout` names the folders and artifacts, and its tests
hold it to this table). The adapters (`adapters.py`) unpack `LoopConfig` into the plain
arguments each phase's library takes, given a `context.PhaseContext`; phases never import
each other, and none of them knows what comes next.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuneloop.cascade.command import COMPOSITION_FILE
from tuneloop.config import LoopConfig
from tuneloop.loop.adapters import (
    run_archive,
    run_capstone,
    run_data,
    run_doctor,
    run_eval_post,
    run_eval_pre,
    run_eval_warmup,
    run_gate,
    run_merge,
    run_replay,
    run_report,
    run_train,
)
from tuneloop.loop.cascade import FRONTIER_FILE, cascade_files, champion_files, run_compose
from tuneloop.loop.context import PhaseContext
from tuneloop.loop.corpus_data import bands_serve_base, replay_files
from tuneloop.loop.integrity import preflight_gate, run_promote
from tuneloop.loop.layout import CASCADE_FILE, SELECTION_FILE
from tuneloop.loop.portfolio.preflight import challenger_files, preflight_portfolio
from tuneloop.loop.portfolio.run import run_challengers
from tuneloop.loop.track import run_track, tracking_retry
from tuneloop.loop.warmup import evaluates_warmup

__all__ = ["CHALLENGER_PHASES", "PHASES", "PHASE_NAMES", "Phase"]


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
    """Keep the folder's partial contents on a crash resume (the eval fills missing samples;
    train resumes from its checkpoints, `train.checkpoint`)."""
    preflight: Callable[[LoopConfig, Path, bool], None] | None = None
    """Checked before any phase runs when this phase will run: (config, workdir, whether its
    upstream phases are all unchanged). Raises `InputError` to refuse the run."""
    retry: Callable[[LoopConfig, Path], str | None] | None = None
    """(config, its folder) → why a finished phase whose outputs verify runs again, in place
    and in the same round; None to skip it. `track` retries a failed MLflow write."""


# ---- the table ----------------------------------------------------------------------------


def _serve_config(cfg: LoopConfig) -> dict[str, Any]:
    """What of `serve:` changes a served model's answers."""
    return {
        "backend": cfg.serve.backend,
        # which external model each arm queries changes the log (None for local backends)
        "external": (
            cfg.serve.external.model_dump(mode="json") if cfg.serve.backend == "external" else None
        ),
        # vLLM's dtype, lengths and seed change its answers (its environment, its version)
        "vllm": cfg.serve.vllm.model_dump(mode="json") if cfg.serve.backend == "vllm" else None,
    }


def _eval_config(cfg: LoopConfig) -> Any:
    return _serve_config(cfg) | {
        "eval": cfg.eval.model_dump(mode="json"),
        "suite": cfg.suite.model_dump(mode="json", exclude={"path"}),
    }


def _doctor_config(cfg: LoopConfig) -> Any:
    if cfg.serve.challenger != "adapter":
        return None
    return _eval_config(cfg) | {
        "agreement_items": cfg.merge.agreement_items,
        "gate_slice": cfg.gate.slice if cfg.gate.enabled else None,
    }


EVAL_OUT = ("samples.jsonl", "summary.json")

PHASES: tuple[Phase, ...] = (
    Phase(
        "data",
        run_data,
        outputs=("sft.jsonl", "traces.jsonl", "provenance.json"),
        # the loop's suite is always decontaminated against (loop.corpus_data); prompts
        # banded by the base's own pass rate depend on the base, and on how it is served
        files=lambda c: (
            ({"corpus_config": c.data.corpus, "suite": c.suite.path} if c.data.corpus else {})
            | ({"base_model": c.base} if bands_serve_base(c) else {})
        ),
        config=lambda c: _serve_config(c) if bands_serve_base(c) else None,
        enabled=lambda c: c.data.corpus is not None,
    ),
    Phase(
        "replay",
        run_replay,
        # rows and pairs as selected, their decontaminated copies (what training reads)
        outputs=(
            "report.json",
            "report.md",
            "sft.jsonl",
            "dpo.jsonl",
            "sft.decontaminated.jsonl",
            "dpo.decontaminated.jsonl",
            "decontamination.json",
        ),
        after=("data",),
        files=lambda c: replay_files(c) if c.replay.teachers is not None else {},
        # paths are hashed as files; how many calls are in flight changes no answer
        config=lambda c: c.replay.model_dump(
            mode="json", exclude={"teachers", "traces", "concurrency"}
        ),
        enabled=lambda c: c.replay.teachers is not None,
        resumable=True,  # calls.jsonl: a crash resume pays only for the calls not yet logged
    ),
    Phase(
        "eval_pre",
        run_eval_pre,
        outputs=EVAL_OUT,
        # the base, or a cascade champion (`cascade.champion`: the base is its tunable tier)
        files=lambda c: champion_files(c) | {"suite": c.suite.path},
        config=_eval_config,
        resumable=True,
    ),
    Phase(
        "challengers",
        run_challengers,
        outputs=(SELECTION_FILE,),
        # every challenger trains on the data and replay phases' rows; under
        # `gate.adjudicate: all` each is judged against the champion's log
        after=("data", "replay", "eval_pre"),
        files=lambda c: (
            {"base_model": c.base, "suite": c.suite.path}
            | ({"data": c.train.data} if c.train.data else {})
            | challenger_files(c)
        ),
        config=lambda c: (
            _eval_config(c)
            | {
                "portfolio": c.portfolio.model_dump(mode="json") if c.portfolio else None,
                "train": c.train.model_dump(mode="json"),
                "data_output": c.data.output,
                "merge": c.merge.model_dump(mode="json"),
                "challenger": c.serve.challenger,
                "adjudicate": c.gate.adjudicate,
                "gate": c.gate.model_dump(mode="json", exclude={"ledger"})
                if c.gate.adjudicate == "all"
                else None,
            }
        ),
        enabled=lambda c: c.portfolio is not None,
        resumable=True,  # each challenger's own round resumes where it stopped
        preflight=preflight_portfolio,
    ),
    Phase(
        "train",
        run_train,
        outputs=("adapter",),
        # with a portfolio: the selected challenger's adapter (`loop.portfolio.run`)
        after=("data", "replay", "challengers"),
        files=lambda c: (
            {"base_model": c.base, "suite": c.suite.path}
            | ({"data": c.train.data} if c.train.data else {})
            | ({"pairs": c.train.composite.pairs} if c.train.composite.pairs else {})
            | ({"hint_rows": c.train.composite.hint_rows} if c.train.composite.hint_rows else {})
            | ({"sft_warmup_data": c.train.sft_warmup_data} if c.train.sft_warmup_data else {})
        ),
        config=lambda c: (
            c.train.model_dump(mode="json", exclude={"data", "sft_warmup_data"})
            | ({"data_output": c.data.output} if c.data.output else {})
        ),
        enabled=lambda c: not c.merge.zero_adapter,
        resumable=True,
    ),
    Phase(
        "merge",
        run_merge,
        outputs=("model",),
        after=("train",),
        files=lambda c: {"base_model": c.base},
        config=lambda c: c.merge.model_dump(mode="json"),
    ),
    Phase(
        "doctor",
        run_doctor,
        outputs=("doctor.json",),
        # an adapter challenger is served beside the merged model first (`merge.agreement_items`)
        after=("train", "merge"),
        files=lambda c: (
            {"base_model": c.base, "suite": c.suite.path} if c.serve.challenger == "adapter" else {}
        ),
        config=_doctor_config,
    ),
    Phase(
        "eval_warmup",
        run_eval_warmup,
        outputs=EVAL_OUT,
        # the warm-up's adapter, merged on the base for this phase only, served like the arms
        after=("train",),
        files=lambda c: {"base_model": c.base, "suite": c.suite.path},
        config=_eval_config,
        enabled=evaluates_warmup,
        resumable=True,
    ),
    Phase(
        "compose",
        run_compose,
        outputs=(CASCADE_FILE, COMPOSITION_FILE, FRONTIER_FILE),
        # each tier alone on the validation slice, composed; the trained tier is the merged model
        after=("train", "merge", "doctor"),
        files=lambda c: {"base_model": c.base, "suite": c.suite.path} | cascade_files(c),
        config=lambda c: (
            _eval_config(c) | {"cascade": c.cascade.model_dump(mode="json") if c.cascade else None}
        ),
        enabled=lambda c: c.serve.challenger == "cascade",
        resumable=True,  # each tier's eval fills its missing samples
    ),
    Phase(
        "eval_post",
        run_eval_post,
        outputs=EVAL_OUT,
        # the merged model answers, the trained adapter on the base, or the composed cascade
        # (`serve.challenger`)
        after=("train", "merge", "doctor", "compose"),
        files=lambda c: {"base_model": c.base, "suite": c.suite.path},
        config=lambda c: _eval_config(c) | {"challenger": c.serve.challenger},
        resumable=True,
    ),
    Phase(
        "report",
        run_report,
        outputs=("delta.json", "delta.md", "passk.png", "items.png"),
        after=("eval_pre", "eval_post", "eval_warmup"),
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
        after=("eval_pre", "train", "eval_post", "merge", "compose", "report"),
        config=lambda c: {
            "gate": c.gate.model_dump(mode="json", exclude={"ledger"}),
            "slices": c.suite.slices,
        },
        enabled=lambda c: c.gate.enabled,
        preflight=preflight_gate,
    ),
    Phase(
        "capstone",
        run_capstone,
        outputs=("report.md", "report.html"),
        after=(
            "replay",
            "eval_pre",
            "challengers",
            "train",
            "merge",
            "doctor",
            "compose",
            "eval_post",
            "report",
            "gate",
        ),
    ),
    Phase(
        "archive",
        run_archive,
        outputs=("archived.json",),
        after=("capstone",),
        config=lambda c: c.archive.model_dump(mode="json"),
        enabled=lambda c: c.archive.enabled,
    ),
    Phase(
        "promote",
        run_promote,
        outputs=("promotion.json",),
        after=("gate", "archive"),
        enabled=lambda c: c.gate.enabled,
    ),
    Phase(
        "track",
        run_track,
        outputs=("tracking.json",),
        after=("merge", "report", "gate", "capstone", "archive", "promote"),
        # the tracking section is left out: another store is a retry, not a new round
        enabled=lambda c: c.tracking.mlflow is not None,
        retry=tracking_retry,
    ),
)

PHASE_NAMES = tuple(p.name for p in PHASES)


def _challenger_phases() -> tuple[Phase, ...]:
    """A portfolio challenger's own round: train (on the rows its config names, resolved from
    the parent round's data and replay phases) → merge → doctor → eval_post (its evaluation on
    the selection slice; no bar is sealed, since its gate is off)."""
    by_name = {p.name: p for p in PHASES}
    return (
        dataclasses.replace(by_name["train"], after=()),
        by_name["merge"],
        by_name["doctor"],
        dataclasses.replace(by_name["eval_post"], after=("train", "merge", "doctor")),
    )


CHALLENGER_PHASES = _challenger_phases()
