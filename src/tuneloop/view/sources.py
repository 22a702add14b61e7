"""Where `tuneloop view` reads: the ledger, its experiment log, the runs' report.html files and
the watcher's state — found from a loop.yaml the way `tuneloop status` finds them, or from a
ledger path alone.

    sources = resolve(Path("loop.yaml"), None)      # gate.ledger, archive.root, workdir
    sources = resolve(None, Path("runs/ledger.db"))  # the ledger; archives beside it

With a loop.yaml the ledger is `gate.ledger` (default: beside the archives), reports are looked
for in `archive.root` and in the workdir's round folders, and the watcher's state is
`<workdir>/flywheel.db`. With `--ledger` alone there is no workdir: reports are looked for in
the archives beside the ledger (the default layout keeps the ledger in the archive root, or
the archive root beside it), and there are no watcher decisions to show. Nothing here writes.

A run's report is the one its archive holds (`<archive>/<run_id>/run/capstone/report.html`:
immutable and verified) before the copy in the workdir, which a later redo may replace; a
workdir copy counts only when that folder's `state.json` names the same run.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from tuneloop.archive import ARCHIVED_RUN_DIR
from tuneloop.config import GateConfig, load_config
from tuneloop.errors import InputError
from tuneloop.loop.layout import RunLayout, archive_root, ledger_path
from tuneloop.loop.state import load_state

Artifact = Callable[[RunLayout], Path]
"""One artifact of a run, as the run's layout names it."""


def capstone_report(run: RunLayout) -> Path:
    """A run's report.html (the capstone phase writes it)."""
    return run.capstone_html


def delta_report(run: RunLayout) -> Path:
    """A run's delta report (paired Δ with its CI)."""
    return run.delta


def portfolio_record(run: RunLayout) -> Path:
    """A portfolio round's challengers and choice (`challengers/selection.json`)."""
    return run.portfolio_record


_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,120}$")


@dataclass(frozen=True)
class Sources:
    """The files one dashboard is read from."""

    ledger: Path
    """The gate ledger (SQLite)."""
    origin: str
    """Where the ledger path came from, for error messages (`gate.ledger of loop.yaml`)."""
    title: str
    """The loop's name (config `name`), or the ledger's folder name."""
    archive_roots: tuple[Path, ...]
    """Folders holding `<run_id>/run/…` archives."""
    workdir: Path | None
    """The loop's workdir (round folders, watcher state); None with `--ledger` alone."""
    gate: GateConfig | None = None
    """The loop's `gate:` section (its α and `gate.sequence`, for the error budget); None
    with `--ledger` alone (the ledger's own sequence is shown, as declared)."""


def from_config(config: Path) -> Sources:
    """The loop.yaml's ledger, archive root and workdir (`tuneloop status` reads the same)."""
    cfg = load_config(config)
    origin = f"gate.ledger of {config}" if cfg.gate.ledger else f"beside the archives of {config}"
    return Sources(
        ledger=ledger_path(cfg),
        origin=origin,
        title=cfg.name,
        archive_roots=(archive_root(cfg),),
        workdir=cfg.workdir,
        gate=cfg.gate,
    )


def from_ledger(ledger: Path) -> Sources:
    folder = ledger.parent
    return Sources(
        ledger=ledger,
        origin="--ledger",
        title=folder.resolve().name or str(ledger),
        archive_roots=(folder, folder / "archive"),
        workdir=None,
    )


def resolve(config: Path | None, ledger: Path | None) -> Sources:
    """The sources of one dashboard; InputError (exit 2) naming the file when the ledger is
    missing. `--ledger` next to a config replaces the config's ledger."""
    if config is None and ledger is None:
        raise InputError(
            "tuneloop view: name the loop (`tuneloop view loop.yaml`) or its ledger "
            "(`tuneloop view --ledger runs/…/ledger.db`)"
        )
    sources = from_config(config) if config is not None else from_ledger(Path(str(ledger)))
    if config is not None and ledger is not None:
        sources = replace(sources, ledger=ledger, origin="--ledger")
    check_ledger(sources.ledger, sources.origin)
    return sources


def check_ledger(path: Path, origin: str) -> None:
    """Refuse a path that is not a ledger file before anything opens (or creates) it."""
    if not path.exists():
        raise InputError(
            f"{path}: no ledger here ({origin}); a loop's gate phase writes it "
            "(`tuneloop run loop.yaml`)"
        )
    if not path.is_file():
        raise InputError(f"{path}: is a folder, not a ledger file ({origin})")


def link_key(run_id: str) -> str:
    """The run's folder name under `runs/` in the bundle and the app: the run id itself when
    it is a plain file name (it always is for tuneloop's ids), else a hash of it."""
    if _SAFE.match(run_id) and run_id not in (".", ".."):
        return run_id
    return "run-" + hashlib.sha256(run_id.encode()).hexdigest()[:16]


def find_artifact(
    sources: Sources, run_id: str, round_id: str | None, artifact: Artifact
) -> Path | None:
    """A run's artifact on disk: in its archive first, else in the workdir or round folder
    whose state names this run; None when neither holds it."""
    if _SAFE.match(run_id):
        for root in sources.archive_roots:
            archived = artifact(RunLayout(root / run_id / ARCHIVED_RUN_DIR))
            if archived.is_file():
                return archived
    if sources.workdir is None:
        return None
    runs = [RunLayout(sources.workdir)]
    if round_id is not None and _SAFE.match(round_id):
        runs.insert(0, runs[0].round(round_id))
    for run in runs:
        found = artifact(run)
        if found.is_file() and run.state.is_file():
            try:
                state = load_state(run.workdir)
            except InputError:  # an unreadable state names no run: not this run's file
                continue
            if state is not None and state.run_id == run_id:
                return found
    return None
