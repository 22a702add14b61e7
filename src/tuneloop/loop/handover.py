"""The round's closing phases' plain inputs, unpacked from the config and the run state.

The capstone report (`tuneloop.report.capstone`) and the archive (`tuneloop.archive`) know
nothing of the loop: which folder holds what, the names under which the runner records input
hashes, which config keys hold paths. This is where that knowledge is turned into their
inputs (paths, hashes, a config dict, the walk-back `train_settings.json` records), next to
the adapters that call them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tuneloop.config import LoopConfig
from tuneloop.config.hub import hub_pin
from tuneloop.loop.corpus_data import trained_file
from tuneloop.loop.layout import LOCK_FILE, QUARANTINE, RunLayout
from tuneloop.loop.rounds import RoundRecord
from tuneloop.loop.state import RunState
from tuneloop.loop.warmup import step_reports
from tuneloop.records import read_record_if_exists
from tuneloop.train.settings import TrainRunRecord

if TYPE_CHECKING:
    from tuneloop.archive import Recipe
    from tuneloop.report import CapstoneInputs


def recorded_hash(state: RunState, phase: str, name: str) -> str | None:
    """An input's sha256 as the runner recorded it for `phase` (no second hash of a model)."""
    rec = state.phases.get(phase)
    return rec.inputs.get(name) if rec is not None else None


def capstone_inputs(cfg: LoopConfig, run: RunLayout, state: RunState) -> CapstoneInputs:
    from tuneloop.report import CapstoneInputs, CascadeInputs

    data, data_sha256 = trained_file(cfg, run, recorded_hash(state, "train", "data"))
    report = run.replay_report if cfg.replay.teachers is not None else None
    trained = read_record_if_exists(run.train_settings, TrainRunRecord)
    return CapstoneInputs(
        pre_summary=run.pre_summary,
        delta=run.delta,
        train_data=data,
        train_data_sha256=data_sha256,
        base_model_sha256=recorded_hash(state, "eval_pre", "base_model"),
        corpus_provenance=run.corpus_provenance,
        train_settings=run.train_settings,
        this_phase="capstone",
        replay_report=report,
        replay_report_sha256=_output_hash(state, "replay", report) if report else None,
        walk_back=trained.walk_back if trained is not None else None,
        steps=step_reports(run.report),
        trained=(
            (trained.steps_done, trained.train_seconds, trained.stop)
            if trained is not None
            else None
        ),
        portfolio=run.portfolio_record if run.portfolio_record.is_file() else None,
        cascade=(
            CascadeInputs(run.composition, run.frontier, run.eval_pre, run.eval_post)
            if cfg.serve.challenger == "cascade"
            else None
        ),
    )


def _output_hash(state: RunState, phase: str, path: Path) -> str | None:
    """An output's sha256 as the runner recorded it when `phase` finished."""
    rec = state.phases.get(phase)
    if rec is None:
        return None
    return next((h for rel, h in rec.outputs.items() if path.as_posix().endswith(rel)), None)


def archive_recipe(cfg: LoopConfig) -> Recipe:
    """What a re-run of this round needs, and the config keys that name it."""
    from tuneloop.archive import MAX_MODEL_COPY_MB, ArchiveInput, Recipe
    from tuneloop.data.corpus.config import resolved_corpus_yaml
    from tuneloop.replay.teachers import resolved_teachers_yaml

    inputs = [ArchiveInput("suite.path", cfg.suite.path, "suite.jsonl")]
    notes: dict[str, str] = {}
    if cfg.train.data is not None:
        inputs.append(ArchiveInput("train.data", cfg.train.data, "train_data.jsonl"))
    if cfg.train.sft_warmup_data is not None:
        warmup = cfg.train.sft_warmup_data
        inputs.append(ArchiveInput("train.sft_warmup_data", warmup, "sft_warmup_data.jsonl"))
    if cfg.data.corpus is not None:
        text = resolved_corpus_yaml(cfg.data.corpus)  # its relative paths made absolute
        inputs.append(ArchiveInput("data.corpus", cfg.data.corpus, "corpus.yaml", text=text))
    if cfg.replay.teachers is not None:
        text = resolved_teachers_yaml(cfg.replay.teachers)
        teachers = ArchiveInput("replay.teachers", cfg.replay.teachers, "teachers.yaml", text=text)
        inputs.append(teachers)
        notes["replay_teachers"] = "embedded teachers in teachers.yaml name original paths"
    if cfg.replay.traces is not None:
        inputs.append(ArchiveInput("replay.traces", cfg.replay.traces, "replay_traces.jsonl"))
        notes["corpus_sources"] = "paths inside corpus.yaml refer to the original machine"
    hub = hub_pin(cfg.base)  # a Hub id was resolved to its cache snapshot at load
    base = ArchiveInput(
        "base_model",
        cfg.base,
        "base_model",
        max_copy_mb=MAX_MODEL_COPY_MB,
        repo_id=hub.repo_id if hub is not None else None,
        revision=hub.revision if hub is not None else None,
    )
    inputs.append(base)
    lineage = read_record_if_exists(RunLayout(cfg.workdir).round_file, RoundRecord)
    return Recipe(
        round=lineage.model_dump(mode="json") if lineage is not None else None,
        config=cfg.model_dump(mode="json"),
        inputs=tuple(inputs),
        # a re-run writes beside the archive (ROOT/reproduce/RUN/), never into it
        outputs={"workdir": "work", "archive.root": "archive", "gate.ledger": "ledger.db"},
        notes=notes,
    )


def not_archived(archive_folder: Path) -> tuple[str, ...]:
    """Workdir entries that are not part of the run: the lock, the archive phase's own folder
    (written after the copy) and the outputs earlier redos replaced; and in a portfolio round,
    each challenger's lock and merged model — its adapter, its validation log and the merged
    model's hash (its `state.json`, `challengers/selection.json`) are kept, and the one the
    gate judged is the round's own `merge/model`, so a real model is not archived once per
    challenger."""
    run = RunLayout(archive_folder.parent)
    mine = [LOCK_FILE, archive_folder.name, QUARANTINE]
    if run.challengers.is_dir():
        for folder in sorted(p for p in run.challengers.iterdir() if p.is_dir()):
            sub = run.challenger(folder.name)
            for path in (sub.lock, sub.merged_model):
                mine.append(str(path.relative_to(run.workdir)))
    return tuple(mine)
