"""Where a run's things live: `RunLayout(workdir)`, and the paths derived from the config.

    layout = RunLayout(cfg.workdir)
    layout.verdict          # <workdir>/gate/verdict.json
    layout.round("r0003")   # the RunLayout of <workdir>/rounds/r0003/

One place for the paths of a run's artifacts, so that the loop's phases, its integrity
checks, the flywheel and the view never disagree about them. A phase folder is named after
its row of the phase table (`phases.py`; the layout tests hold the two together); a file
name comes from the package that writes it (`VERDICT_FILE` from the gate, `DELTA_FILE` from
the report, …) or, for what the loop writes itself, from the constants below. Where the
owner's module loads numpy and scipy (the gate's verdict, the report, the corpus build, the
replay), the property imports the name when it is asked, so that `tuneloop --help` and
`tuneloop check` stay cheap.

The archive root and the ledger are the config's (`archive_root`, `ledger_path`): they sit
outside the workdir, shared by every round.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tuneloop.archive import ARCHIVED_FILE
from tuneloop.config import LoopConfig
from tuneloop.config.base import check_path_component
from tuneloop.gate.seal import SEAL_FILE
from tuneloop.records.train_metrics import METRICS_FILE
from tuneloop.samplelog import SUMMARY_FILE
from tuneloop.tracking import TRACKING_FILE

STATE_FILE = "state.json"
"""The run state (`state.RunState`), at the top of the workdir."""
LOCK_FILE = ".lock"
"""The one-run-per-workdir lock (`state.WorkdirLock`)."""
QUARANTINE = "quarantine"
"""Folder under the workdir where replaced phase outputs are kept."""
ROUNDS = "rounds"
"""Folder under a flywheel's workdir holding one workdir per round."""
ROUND_FILE = "round.json"
"""A round's lineage (`rounds.RoundRecord`), at the top of its workdir."""
PHASE_FILE = "phase.json"
"""A phase's record (`state.PhaseRecord`), in its folder."""
PHASE_LOG = "phase.log"
"""A phase's log, in its folder."""
ADAPTER = "adapter"
"""The train phase's output folder (the LoRA adapter, its settings and metrics)."""
MODEL = "model"
"""The merge phase's output folder (the merged checkpoint)."""
DOCTOR_FILE = "doctor.json"
"""The doctor phase's report."""
PROMOTION_FILE = "promotion.json"
"""The promote phase's record (`gate.promotion.Promotion`)."""
CAPSTONE_FILE = "report.md"
"""The capstone's page (`report.capstone.write_capstone` writes where it is told, and its
`report.html` beside it)."""
CASCADE_FILE = "cascade.json"
"""A cascade round's composed cascade (a descriptor), in the `compose` phase's folder."""
SELECTION_FILE = "selection.json"
"""A portfolio round's challenger table and choice (`records.selection.PortfolioRecord`), in
the `challengers` phase's folder."""


@dataclass(frozen=True)
class RunLayout:
    """The folders and artifacts of one run (a loop workdir, or one round's)."""

    workdir: Path

    def phase(self, name: str) -> Path:
        """A phase's folder: its name in the phase table."""
        return self.workdir / name

    # ---- the run -------------------------------------------------------------------------

    @property
    def state(self) -> Path:
        return self.workdir / STATE_FILE

    @property
    def lock(self) -> Path:
        return self.workdir / LOCK_FILE

    @property
    def quarantine(self) -> Path:
        return self.workdir / QUARANTINE

    @property
    def round_file(self) -> Path:
        return self.workdir / ROUND_FILE

    @property
    def rounds(self) -> Path:
        return self.workdir / ROUNDS

    def round(self, round_id: str) -> RunLayout:
        """The layout of one round of this (flywheel) workdir."""
        return RunLayout(self.rounds / round_id)

    # ---- phase folders, in the order of the table ------------------------------------------

    @property
    def data(self) -> Path:
        return self.phase("data")

    @property
    def replay(self) -> Path:
        return self.phase("replay")

    @property
    def eval_pre(self) -> Path:
        return self.phase("eval_pre")

    @property
    def train(self) -> Path:
        return self.phase("train")

    @property
    def merge(self) -> Path:
        return self.phase("merge")

    @property
    def doctor(self) -> Path:
        return self.phase("doctor")

    @property
    def compose(self) -> Path:
        """A cascade round's phase: each tier's validation eval, the composition, the
        chosen cascade (`serve.challenger: cascade`)."""
        return self.phase("compose")

    @property
    def cascade(self) -> Path:
        """The composed cascade's descriptor, what the post arm serves."""
        return self.compose / CASCADE_FILE

    @property
    def composition(self) -> Path:
        from tuneloop.cascade.command import COMPOSITION_FILE

        return self.compose / COMPOSITION_FILE

    @property
    def frontier(self) -> Path:
        """The composition's accuracy/cost frontier, drawn (`cascade.plot.frontier_svg`)."""
        from tuneloop.cascade.command import FRONTIER_FILE

        return self.compose / FRONTIER_FILE

    @property
    def eval_post(self) -> Path:
        return self.phase("eval_post")

    @property
    def report(self) -> Path:
        return self.phase("report")

    @property
    def gate(self) -> Path:
        return self.phase("gate")

    @property
    def capstone(self) -> Path:
        return self.phase("capstone")

    @property
    def archive(self) -> Path:
        return self.phase("archive")

    @property
    def promote(self) -> Path:
        return self.phase("promote")

    @property
    def track(self) -> Path:
        return self.phase("track")

    # ---- artifacts ---------------------------------------------------------------------------

    @property
    def corpus_rows(self) -> Path:
        """The corpus build's chat rows (`data.output: sft`)."""
        from tuneloop.data.corpus import SFT_FILE

        return self.data / SFT_FILE

    @property
    def corpus_traces(self) -> Path:
        """The corpus build's canonical traces (what a replay replays by default)."""
        from tuneloop.data.corpus import TRACES_FILE

        return self.data / TRACES_FILE

    @property
    def corpus_provenance(self) -> Path:
        from tuneloop.data.corpus import PROVENANCE_FILE

        return self.data / PROVENANCE_FILE

    @property
    def replay_report(self) -> Path:
        from tuneloop.replay.outputs import REPORT_FILE

        return self.replay / REPORT_FILE

    @property
    def pre_summary(self) -> Path:
        return self.eval_pre / SUMMARY_FILE

    @property
    def post_summary(self) -> Path:
        return self.eval_post / SUMMARY_FILE

    @property
    def sealed_bar(self) -> Path:
        """The bar sealed before the post evaluation (`integrity.seal_round`)."""
        return self.eval_post / SEAL_FILE

    @property
    def adapter(self) -> Path:
        return self.train / ADAPTER

    @property
    def warmup_adapter(self) -> Path:
        """The SFT warm-up's own adapter inside the trained one (GRPO, composite)."""
        from tuneloop.train.settings import WARMUP_ADAPTER

        return self.adapter / WARMUP_ADAPTER

    @property
    def eval_warmup(self) -> Path:
        return self.phase("eval_warmup")

    @property
    def challengers(self) -> Path:
        """A portfolio round's phase: one run folder per challenger, and the choice."""
        return self.phase("challengers")

    def challenger(self, name: str) -> RunLayout:
        """One challenger's own run (train, merge, doctor, its validation evaluation)."""
        return RunLayout(self.challengers / name)

    @property
    def portfolio_record(self) -> Path:
        """`records.selection.PortfolioRecord`: every challenger, its cost and figures, the
        choice (a portfolio round only)."""
        return self.challengers / SELECTION_FILE

    @property
    def train_settings(self) -> Path:
        from tuneloop.train.run import SETTINGS_FILE

        return self.adapter / SETTINGS_FILE

    @property
    def train_metrics(self) -> Path:
        return self.adapter / METRICS_FILE

    @property
    def merged_model(self) -> Path:
        return self.merge / MODEL

    @property
    def doctor_report(self) -> Path:
        return self.doctor / DOCTOR_FILE

    @property
    def delta(self) -> Path:
        from tuneloop.report.build import DELTA_FILE

        return self.report / DELTA_FILE

    @property
    def delta_md(self) -> Path:
        from tuneloop.report.build import MARKDOWN_FILE

        return self.report / MARKDOWN_FILE

    @property
    def verdict(self) -> Path:
        from tuneloop.gate.verdict import VERDICT_FILE

        return self.gate / VERDICT_FILE

    @property
    def capstone_md(self) -> Path:
        return self.capstone / CAPSTONE_FILE

    @property
    def capstone_html(self) -> Path:
        from tuneloop.report.html import HTML_FILE

        return self.capstone / HTML_FILE

    @property
    def archived(self) -> Path:
        return self.archive / ARCHIVED_FILE

    @property
    def promotion(self) -> Path:
        return self.promote / PROMOTION_FILE

    @property
    def tracking(self) -> Path:
        return self.track / TRACKING_FILE


# ---- from the config -----------------------------------------------------------------------


def archive_root(cfg: LoopConfig) -> Path:
    return cfg.archive.root or cfg.workdir.parent / "archive"


def archive_dir(cfg: LoopConfig, run_id: str) -> Path:
    """`<archive root>/<run_id>`; InputError when the run id could leave the root (`../x`)."""
    return archive_root(cfg) / check_path_component(run_id, "run id (the config's `name`)")


def ledger_path(cfg: LoopConfig) -> Path:
    """The gate ledger: `gate.ledger`, else beside the archives (outside the workdir, so that
    clearing a workdir never clears the one-look history)."""
    return cfg.gate.ledger or archive_root(cfg) / "ledger.db"


@dataclass(frozen=True)
class SuiteView:
    """The suite's revision, every configured slice's item ids and every item's content hash,
    from one read of the file."""

    revision: str
    slices: dict[str, list[str]]
    hashes: dict[str, str] = field(default_factory=dict)
    """Item id → `SuiteItem.content_sha256` (what a look at it is recorded with)."""

    def contents(self, ids: list[str]) -> dict[str, str | None]:
        """id → content hash, in the order of `ids`."""
        return {i: self.hashes.get(i) for i in ids}


def suite_view(cfg: LoopConfig) -> SuiteView:
    from tuneloop.suite import load_suite, resolve_slice, slice_names

    suite = load_suite(cfg.suite.path, cfg.suite.default_scorer)
    names = slice_names(suite, cfg.suite)
    return SuiteView(
        suite.revision,
        {n: resolve_slice(suite, cfg.suite, n) for n in names},
        {i.id: i.content_sha256 for i in suite.items},
    )


def slice_ids(cfg: LoopConfig, name: str) -> list[str]:
    """One slice's ids: a fraction, a rolling part or a union (`tuneloop.suite.rolling`); an
    unknown name is the suite module's error, naming the slices."""
    from tuneloop.suite import load_suite, resolve_slice

    suite = load_suite(cfg.suite.path, cfg.suite.default_scorer)
    return resolve_slice(suite, cfg.suite, name)
