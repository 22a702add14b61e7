"""`tuneloop view --bundle DIR`: the dashboard as a static site, written atomically.

    DIR/index.html                  the dashboard (view/page.py)
    DIR/runs/<run_id>/report.html   each run's own report.html, copied as it is
    DIR/.tuneloop-view              marks the folder as a bundle (a later bundle may replace it)

Every link is relative and every page self-contained (inline CSS and SVG, no script on the
dashboard, no URL), so the folder opens from disk, can be zipped and attached to a review, or
published as it is. The bundle is built in a temporary sibling folder and renamed into place:
a reader never sees half of one. DIR may be absent, empty, or an earlier bundle (replaced
whole); anything else is refused (exit 2) — this never deletes a folder it did not write.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from tuneloop.errors import InputError, require_writable_dir
from tuneloop.records import atomic_write_text
from tuneloop.view.history import Dashboard
from tuneloop.view.page import render_dashboard

INDEX_FILE = "index.html"
"""The dashboard page at the top of the bundle (also served by the app under this name)."""
MARKER = ".tuneloop-view"


def check_target(out: Path) -> None:
    """Refuse (InputError, exit 2) a target that is a file, a folder holding other files, or
    below something that cannot hold a folder; before any reading starts."""
    require_writable_dir(out.parent, "--bundle")
    if not out.exists():
        return
    if not out.is_dir():
        raise InputError(f"--bundle {out}: is a file, not a folder")
    if any(out.iterdir()) and not (out / MARKER).is_file():
        raise InputError(
            f"--bundle {out}: the folder holds other files; name a new or empty folder "
            "(an earlier bundle there would be replaced)"
        )


def write_bundle(dashboard: Dashboard, out: Path) -> list[Path]:
    """Write the site into `out` (see the module docstring); returns the reports copied."""
    out = Path(out)
    check_target(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        copied = _fill(staging, dashboard)
        _swap(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return copied


def _fill(folder: Path, dashboard: Dashboard) -> list[Path]:
    copied = []
    for r in dashboard.rounds:
        if r.report is None:
            continue
        target = folder / r.report.href
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(r.report.path, target)
        copied.append(r.report.path)
    atomic_write_text(folder / INDEX_FILE, render_dashboard(dashboard))
    atomic_write_text(folder / MARKER, "written by `tuneloop view --bundle`; safe to replace\n")
    # temp files and mkdtemp are private; a bundle is for sharing
    for path in (folder / INDEX_FILE, folder / MARKER):
        os.chmod(path, 0o644)
    os.chmod(folder, 0o755)
    return copied


def _swap(staging: Path, out: Path) -> None:
    """Rename the new bundle into place; an earlier one goes aside first, then away."""
    if not out.exists():
        staging.rename(out)
        return
    old = out.parent / f".{out.name}.old-{os.getpid()}"
    out.rename(old)
    try:
        staging.rename(out)
    except BaseException:
        old.rename(out)
        raise
    shutil.rmtree(old, ignore_errors=True)
