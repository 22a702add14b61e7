"""Verify an archive: re-hash every file against its manifest; refuse links and strays."""

from __future__ import annotations

from pathlib import Path

from tuneloop.errors import InputError
from tuneloop.records import read_record, sha256_file
from tuneloop.records.manifest import Archived, Manifest, ManifestFile

MANIFEST = "manifest.json"
MANIFEST_HASH = "MANIFEST.sha256"
ARCHIVED_FILE = "archived.json"
ARCHIVED_RUN_DIR = "run"
"""The folder of an archive (`<archive root>/<run_id>/`) that holds the run's workdir."""


def read_archived(folder: Path) -> Archived:
    return read_record(Path(folder) / ARCHIVED_FILE, Archived)


def read_manifest(folder: Path) -> Manifest:
    return read_record(Path(folder) / MANIFEST, Manifest)


def file_table(root: Path) -> list[ManifestFile]:
    """Every plain file under `root` but the manifest and its hash file, sorted by path."""
    rows = []
    for p in sorted(q for q in root.rglob("*") if q.is_file() and not q.is_symlink()):
        rel = p.relative_to(root).as_posix()
        if rel in (MANIFEST, MANIFEST_HASH):
            continue
        rows.append(ManifestFile(path=rel, size=p.stat().st_size, sha256=sha256_file(p)))
    return rows


def verify_archive(folder: Path) -> list[str]:
    """Every problem found; an empty list means the archive is intact."""
    folder = Path(folder)
    problems: list[str] = []
    manifest_path = folder / MANIFEST
    if not folder.is_dir():
        what = "not found" if not folder.exists() else "not a folder"
        raise InputError(f"{folder}: {what} (expected an archived run folder, ROOT/RUN_ID)")
    if not manifest_path.exists():
        raise InputError(f"{folder}: no {MANIFEST}; is this a tuneloop archive?")
    hash_file = folder / MANIFEST_HASH
    recorded = hash_file.read_text().split()[0] if hash_file.exists() else None
    if recorded != sha256_file(manifest_path):
        problems.append(f"{MANIFEST}: its sha256 does not match {MANIFEST_HASH}")
    try:
        manifest = read_manifest(folder)
    except InputError as err:
        return [*problems, str(err)]
    files, run_id = manifest.files, manifest.run_id
    if run_id is not None and (run_id in ("", ".", "..") or "/" in run_id or "\\" in run_id):
        # its folder was <root>/<run_id>: a name that climbs (`../../x`) put it elsewhere
        problems.append(f"{MANIFEST}: run id {run_id!r} is not one folder name under the root")
    listed = set()
    root = folder.resolve()
    for row in files:
        path = folder / row.path
        listed.add(row.path)
        if path.is_symlink() or any(p.is_symlink() for p in path.parents if p != folder.parent):
            problems.append(f"{row.path}: is a link (an archive holds plain files only)")
        elif not path.resolve().is_relative_to(root):
            problems.append(f"{row.path}: points outside the archive")
        elif not path.is_file():
            problems.append(f"{row.path}: missing")
        elif path.stat().st_size != row.size or sha256_file(path) != row.sha256:
            problems.append(f"{row.path}: content changed (sha256 mismatch)")
    extra = {r.path for r in file_table(folder)} - listed
    problems.extend(f"{p}: not in the manifest" for p in sorted(extra))
    links = [q for q in folder.rglob("*") if q.is_symlink()]
    problems.extend(
        f"{q.relative_to(folder)}: is a link (an archive holds plain files only)"
        for q in sorted(links)
        if str(q.relative_to(folder)) not in listed
    )
    return problems
