"""Where a round's things live, derived from the config: archive, ledger, gate slice items.

One place for the paths the loop's adapters and its integrity checks share, so that the gate,
the archive and the promotion never disagree about them.
"""

from __future__ import annotations

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


def slice_ids(cfg: LoopConfig, name: str) -> list[str]:
    from tuneloop.suite import load_suite
    from tuneloop.suite import slice_ids as ids

    suite = load_suite(cfg.suite.path, cfg.suite.default_scorer)
    return ids(suite, cfg.suite.slices, name, stratify_by_tag=cfg.suite.stratify_by_tag)


def suite_revision(cfg: LoopConfig) -> str:
    from tuneloop.suite import load_suite

    return load_suite(cfg.suite.path, cfg.suite.default_scorer).revision
