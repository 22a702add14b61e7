"""Archive phase: copy a finished run with a manifest, and verify an archive byte for byte.

`archive_run(workdir, target, cfg)` copies the run's workdir (every phase folder and the
state), the inputs needed to reproduce it (`inputs/`: the suite, training data, corpus
config, and the base model when it is at most `MAX_MODEL_COPY_MB`; a larger base model is
recorded by path and hash only), and a `inputs/loop.yaml` whose paths point at those copies.
`manifest.json` lists every file's path, size and sha256, the resolved config, code version,
package versions, hardware, per-phase timings and the lineage (which artifact came from
which inputs). `MANIFEST.sha256` holds the manifest's own hash, so that a flipped byte
anywhere — an artifact, the manifest, or that file — fails `tuneloop archive verify`.

The copy is made in a temporary folder beside the target and renamed into place, so an
archive either exists whole or not at all. An archive is never overwritten: a changed re-run
is a new round with its own run id and archive; finding the target already there is only
accepted when it verifies and is this very run (a resume after a crash at the rename). The
workdir's `quarantine/` (outputs replaced by earlier redos) is not part of the run and is not
copied. `verify` refuses links: every archived path must be a plain file inside the archive.

Reproduce a run: `tuneloop run ROOT/RUN/inputs/loop.yaml` writes into
`ROOT/reproduce/RUN/` (outside the archived folder), then compare its
`work/report/delta.json` with `ROOT/RUN/run/report/delta.json`.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from tuneloop.config import LoopConfig
from tuneloop.errors import InputError, PhaseFailed
from tuneloop.provenance import code_version, stamp
from tuneloop.records import (
    Record,
    atomic_write_text,
    read_json,
    read_record,
    sha256_file,
    sha256_path,
    write_json,
)

MAX_MODEL_COPY_MB = 512
MANIFEST = "manifest.json"
MANIFEST_HASH = "MANIFEST.sha256"
ARCHIVED_FILE = "archived.json"
NOT_ARCHIVED = (".lock", "archive", "quarantine")
"""Workdir entries that are not part of the run: the lock, the archive phase's own folder
(written after the copy) and outputs earlier redos replaced."""


class Archived(Record):
    """Where a run was archived (the archive phase's output)."""

    KIND = "archived"
    VERSION = 1

    path: str
    """The archive folder."""
    manifest_sha256: str
    """sha256 of its manifest.json."""
    run_id: str | None = None
    """The run (round) it holds."""


def read_archived(folder: Path) -> Archived:
    return read_record(Path(folder) / ARCHIVED_FILE, Archived)


def _copy_inputs(cfg: LoopConfig, dest: Path, run_name: str) -> dict[str, Any]:
    """Copy what a re-run needs; return the config overrides pointing at the copies."""
    dest.mkdir(parents=True)
    new: dict[str, Any] = cfg.model_dump(mode="json")
    external: dict[str, Any] = {}
    shutil.copy2(cfg.suite.path, dest / "suite.jsonl")
    new["suite"]["path"] = "suite.jsonl"
    if cfg.train.data is not None:
        shutil.copy2(cfg.train.data, dest / "train_data.jsonl")
        new["train"]["data"] = "train_data.jsonl"
    if cfg.data.corpus is not None:
        shutil.copy2(cfg.data.corpus, dest / "corpus.yaml")
        new["data"]["corpus"] = "corpus.yaml"
        external["corpus_sources"] = "paths inside corpus.yaml refer to the original machine"
    size_mb = sum(p.stat().st_size for p in cfg.base_model.rglob("*") if p.is_file()) / 2**20
    if size_mb <= MAX_MODEL_COPY_MB:
        shutil.copytree(cfg.base_model, dest / "base_model")
        new["base_model"] = "base_model"
    else:
        external["base_model"] = {"path": str(cfg.base_model), "size_mb": round(size_mb, 1)}
    # outside the archived run's folder, so that reproducing never touches what verify checks
    again = f"../../reproduce/{run_name}"
    new["workdir"] = f"{again}/work"
    new["archive"]["root"] = f"{again}/archive"
    new["gate"]["ledger"] = f"{again}/ledger.db"
    atomic_write_text(dest / "loop.yaml", yaml.safe_dump(new, sort_keys=False))
    return external


def _lineage(state: dict[str, Any]) -> list[dict[str, Any]]:
    """One entry per phase: its outputs and the inputs (with hashes) they came from."""
    out = []
    for name, rec in state.get("phases", {}).items():
        if rec.get("status") != "done":
            continue
        out.append({"phase": name, "inputs": rec.get("inputs", {}), "outputs": rec["outputs"]})
    return out


def _recorded_base_hash(state: dict[str, Any]) -> str | None:
    """The base model's hash as the runner recorded it for the first eval."""
    phases = state.get("phases", {})
    digest = phases.get("eval_pre", {}).get("inputs", {}).get("base_model")
    return str(digest) if digest else None


def _file_table(root: Path) -> list[dict[str, Any]]:
    rows = []
    for p in sorted(q for q in root.rglob("*") if q.is_file() and not q.is_symlink()):
        rel = p.relative_to(root).as_posix()
        if rel in (MANIFEST, MANIFEST_HASH) or p.name == ".lock":
            continue
        rows.append({"path": rel, "size": p.stat().st_size, "sha256": sha256_file(p)})
    return rows


def archive_run(workdir: Path, target: Path, cfg: LoopConfig) -> str:
    """Copy the run and write its manifest; returns the manifest's sha256.

    Never overwrites: an existing target is accepted only when it verifies and holds this
    run (a resume after a crash between the rename and the phase record).
    """
    state = read_json(workdir / "state.json")
    if target.exists():
        return _existing(target, state.get("run_id"))
    tmp = target.with_name(f".{target.name}.partial")
    shutil.rmtree(tmp, ignore_errors=True)  # our own unfinished copy, never a user's file
    shutil.copytree(workdir, tmp / "run", ignore=shutil.ignore_patterns(*NOT_ARCHIVED))
    external = _copy_inputs(cfg, tmp / "inputs", target.name)
    manifest = {
        "schema": "tuneloop.manifest/1",
        "run_id": state.get("run_id"),
        "config": cfg.model_dump(mode="json"),
        "code_version": code_version(),
        "provenance": stamp(),
        "timings_s": {k: v.get("duration_s") for k, v in state.get("phases", {}).items()},
        "lineage": _lineage(state),
        "external_inputs": external,
        "base_model_sha256": _recorded_base_hash(state) or sha256_path(cfg.base_model),
        "files": _file_table(tmp),
    }
    write_json(tmp / MANIFEST, manifest)
    digest = sha256_file(tmp / MANIFEST)
    atomic_write_text(tmp / MANIFEST_HASH, f"{digest}  {MANIFEST}\n")
    tmp.rename(target)
    return digest


def _existing(target: Path, run_id: str | None) -> str:
    try:
        problems = verify_archive(target)
    except InputError as err:
        problems = [str(err)]
    held = read_json(target / MANIFEST).get("run_id") if not problems else None
    if problems or held != run_id:
        why = "; ".join(problems[:3]) if problems else f"it holds run {held!r}"
        raise PhaseFailed(
            f"archive {target} already exists and {why}; an archive is never overwritten — "
            "move it away yourself if it is not needed, or archive under another root"
        )
    return sha256_file(target / MANIFEST)


def verify_archive(folder: Path) -> list[str]:
    """Every problem found; an empty list means the archive is intact."""
    folder = Path(folder)
    problems: list[str] = []
    manifest_path = folder / MANIFEST
    if not manifest_path.exists():
        raise InputError(f"{folder}: no {MANIFEST}; is this a tuneloop archive?")
    hash_file = folder / MANIFEST_HASH
    recorded = hash_file.read_text().split()[0] if hash_file.exists() else None
    if recorded != sha256_file(manifest_path):
        problems.append(f"{MANIFEST}: its sha256 does not match {MANIFEST_HASH}")
    try:
        files = read_json(manifest_path).get("files", [])
    except InputError as err:
        return [*problems, str(err)]
    listed = set()
    root = folder.resolve()
    for row in files:
        path = folder / row["path"]
        listed.add(row["path"])
        if path.is_symlink() or any(p.is_symlink() for p in path.parents if p != folder.parent):
            problems.append(f"{row['path']}: is a link (an archive holds plain files only)")
        elif not path.resolve().is_relative_to(root):
            problems.append(f"{row['path']}: points outside the archive")
        elif not path.is_file():
            problems.append(f"{row['path']}: missing")
        elif path.stat().st_size != row["size"] or sha256_file(path) != row["sha256"]:
            problems.append(f"{row['path']}: content changed (sha256 mismatch)")
    extra = {r["path"] for r in _file_table(folder)} - listed
    problems.extend(f"{p}: not in the manifest" for p in sorted(extra))
    links = [q for q in folder.rglob("*") if q.is_symlink()]
    problems.extend(
        f"{q.relative_to(folder)}: is a link (an archive holds plain files only)"
        for q in sorted(links)
        if str(q.relative_to(folder)) not in listed
    )
    return problems


archive_app = typer.Typer(help="Inspect and verify run archives.", no_args_is_help=True)


@archive_app.command("verify")
def verify(folder: Annotated[Path, typer.Argument(help="An archived run folder.")]) -> None:
    """Re-hash every archived file against manifest.json; exit 1 on any difference."""
    problems = verify_archive(folder)
    if problems:
        for p in problems:
            typer.echo(f"FAIL {p}", err=True)
        raise typer.Exit(1)
    n = len(read_json(folder / MANIFEST)["files"])
    typer.echo(f"ok: {n} files verified in {folder}")
