"""Write an archive: copy the run and its inputs, write the manifest, rename into place."""

from __future__ import annotations

import copy
import os
import shutil
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from tuneloop.archive.pin import pin_input
from tuneloop.archive.verify import (
    ARCHIVED_RUN_DIR,
    MANIFEST,
    MANIFEST_HASH,
    file_table,
    read_manifest,
    verify_archive,
)
from tuneloop.errors import InputError, PhaseFailed
from tuneloop.provenance import code_version, stamp
from tuneloop.records import atomic_write_text, sha256_file, write_record
from tuneloop.records.manifest import InputPin, Manifest, PhaseLineage
from tuneloop.records.run import RunView

MAX_MODEL_COPY_MB = 512
"""A base model up to this size is copied into the archive; a larger one is recorded only."""


@dataclass(frozen=True)
class ArchiveInput:
    """A file or folder a re-run needs, and the config key that names it."""

    key: str
    """Dotted key of the config holding its path (`suite.path`); pointed at the copy."""
    path: Path
    """Where it is now."""
    name: str
    """Its name under the archive's `inputs/`."""
    max_copy_mb: float | None = None
    """Copied only when at most this large; a larger one keeps its original path in the
    config, is recorded by path and size in the manifest's `external_inputs[key]`, and is
    pinned file by file in its `pins[key]`."""
    text: str | None = None
    """Written under `name` instead of a copy of `path`: a config file whose relative paths
    the caller resolved (a verbatim copy's relative paths would resolve against `inputs/`,
    where the files they name are not)."""
    repo_id: str | None = None
    """The Hugging Face repo id, when `path` is a Hub cache snapshot (pinned if not copied)."""
    revision: str | None = None
    """That snapshot's commit."""


@dataclass(frozen=True)
class Recipe:
    """How to re-run an archived round: its resolved config and the paths in it to rewrite."""

    config: dict[str, Any]
    """The resolved config, JSON-able; the manifest records it as it is."""
    inputs: tuple[ArchiveInput, ...] = ()
    """What a re-run reads, copied into `inputs/` in this order."""
    outputs: Mapping[str, str] = field(default_factory=dict)
    """Dotted config key → name under `ROOT/reproduce/RUN/`: where a re-run writes (outside
    the archived folder, so that reproducing never touches what verify checks)."""
    notes: Mapping[str, str] = field(default_factory=dict)
    """Caveats about the copies, recorded in the manifest's `external_inputs`."""
    round: Mapping[str, Any] | None = None
    """The flywheel round's lineage (parent champion, gate slice, trigger), if it is one."""


def archive_run(
    workdir: Path,
    target: Path,
    run: RunView,
    recipe: Recipe,
    *,
    base_model_sha256: str,
    skip: Collection[str] = (),
) -> str:
    """Copy the run and write its manifest; returns the manifest's sha256.

    `skip` names entries of `workdir` that are not part of the run, as paths relative to it
    (`.lock`, `challengers/a/merge/model`). Never
    overwrites: an existing target is accepted only when it verifies and holds this run (a
    resume after a crash between the rename and the phase record). `target` must be one plain
    folder name inside its root (no `..` anywhere in it): an archive is never written outside
    the archive root, whatever the run's name.
    """
    _contained(target)
    if target.exists():
        return _existing(target, run.run_id)
    tmp = target.with_name(f".{target.name}.partial")
    shutil.rmtree(tmp, ignore_errors=True)  # our own unfinished copy, never a user's file
    top = os.fspath(workdir)
    shutil.copytree(
        workdir,
        tmp / ARCHIVED_RUN_DIR,
        ignore=lambda d, names: [
            n for n in names if os.path.relpath(os.path.join(d, n), top) in skip
        ],
    )
    kept = _copy_inputs(recipe, tmp / "inputs", target.name)
    manifest = Manifest(
        run_id=run.run_id,
        config=recipe.config,
        code_version=code_version(),
        provenance=stamp(),
        timings_s={name: rec.duration_s for name, rec in run.phases.items()},
        lineage=_lineage(run),
        external_inputs=kept.external,
        base_model_sha256=base_model_sha256,
        files=file_table(tmp),
        round=dict(recipe.round) if recipe.round is not None else None,
        pins=kept.pins,
    )
    write_record(tmp / MANIFEST, manifest)
    digest = sha256_file(tmp / MANIFEST)
    atomic_write_text(tmp / MANIFEST_HASH, f"{digest}  {MANIFEST}\n")
    tmp.rename(target)
    return digest


def _contained(target: Path) -> None:
    """InputError unless `target` is a folder name under a path that climbs nowhere (the
    config refuses such a run name at load, `config.base.SafeName`; this is the last guard)."""
    if ".." in target.parts or target.name in ("", "."):
        raise InputError(
            f"archive {target}: not a folder inside the archive root (a run name with '..' or "
            "'/' in it?); nothing written"
        )


class _Kept(NamedTuple):
    """What the manifest records of the inputs left where they were."""

    external: dict[str, Any]
    pins: dict[str, InputPin]


def _copy_inputs(recipe: Recipe, dest: Path, run_name: str) -> _Kept:
    """Copy what a re-run needs and write `loop.yaml` pointing at the copies; return what is
    recorded instead of copied."""
    dest.mkdir(parents=True)
    config = copy.deepcopy(recipe.config)
    kept = _Kept(external=dict(recipe.notes), pins={})
    for item in recipe.inputs:
        if item.max_copy_mb is not None:
            size_mb = _size_mb(item.path)
            if size_mb > item.max_copy_mb:
                kept.external[item.key] = {"path": str(item.path), "size_mb": round(size_mb, 1)}
                kept.pins[item.key] = pin_input(item.path, item.repo_id, item.revision)
                continue
        if item.text is not None:
            atomic_write_text(dest / item.name, item.text)
        elif item.path.is_dir():
            shutil.copytree(item.path, dest / item.name)
        else:
            shutil.copy2(item.path, dest / item.name)
        _set(config, item.key, item.name)
    again = f"../../reproduce/{run_name}"
    for key, name in recipe.outputs.items():
        _set(config, key, f"{again}/{name}")
    atomic_write_text(dest / "loop.yaml", yaml.safe_dump(config, sort_keys=False))
    return kept


def _size_mb(path: Path) -> float:
    files = path.rglob("*") if path.is_dir() else [path]
    return sum(p.stat().st_size for p in files if p.is_file()) / 2**20


def _set(config: dict[str, Any], dotted: str, value: str) -> None:
    *parents, last = dotted.split(".")
    node = config
    for part in parents:
        node = node[part]
    node[last] = value


def _lineage(run: RunView) -> list[PhaseLineage]:
    """One entry per finished phase: its outputs and the inputs (with hashes) they came from."""
    return [
        PhaseLineage(phase=name, inputs=dict(rec.inputs), outputs=dict(rec.outputs))
        for name, rec in run.phases.items()
        if rec.status == "done"
    ]


def _existing(target: Path, run_id: str) -> str:
    try:
        problems = verify_archive(target)
    except InputError as err:
        problems = [str(err)]
    held = read_manifest(target).run_id if not problems else None
    if problems or held != run_id:
        why = "; ".join(problems[:3]) if problems else f"it holds run {held!r}"
        raise PhaseFailed(
            f"archive {target} already exists and {why}; an archive is never overwritten — "
            "move it away yourself if it is not needed, or archive under another root"
        )
    return sha256_file(target / MANIFEST)
