"""Where a round's things live, derived from the config: archive, ledger, gate slice items.

One place for the paths the loop's adapters and its integrity checks share, so that the gate,
the archive and the promotion never disagree about them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tuneloop.config import LoopConfig


def archive_root(cfg: LoopConfig) -> Path:
    return cfg.archive.root or cfg.workdir.parent / "archive"


def archive_dir(cfg: LoopConfig, run_id: str) -> Path:
    return archive_root(cfg) / run_id


def ledger_path(cfg: LoopConfig) -> Path:
    """The gate ledger: `gate.ledger`, else beside the archives (outside the workdir, so that
    clearing a workdir never clears the one-look history)."""
    return cfg.gate.ledger or archive_root(cfg) / "ledger.db"


@dataclass(frozen=True)
class SuiteView:
    """The suite's revision and every configured slice's item ids, from one read of the file."""

    revision: str
    slices: dict[str, list[str]]


def suite_view(cfg: LoopConfig) -> SuiteView:
    from tuneloop.suite import load_suite
    from tuneloop.suite_rolling import resolve_slice, slice_names

    suite = load_suite(cfg.suite.path, cfg.suite.default_scorer)
    names = slice_names(suite, cfg.suite)
    return SuiteView(suite.revision, {n: resolve_slice(suite, cfg.suite, n) for n in names})


def slice_ids(cfg: LoopConfig, name: str) -> list[str]:
    """One slice's ids: a fraction, a rolling part or a union (`tuneloop.suite_rolling`); an
    unknown name is the suite module's error, naming the slices."""
    from tuneloop.suite import load_suite
    from tuneloop.suite_rolling import resolve_slice

    suite = load_suite(cfg.suite.path, cfg.suite.default_scorer)
    return resolve_slice(suite, cfg.suite, name)
