"""Archive phase: copy a finished run with a manifest, and verify an archive byte for byte.

    tuneloop archive verify ROOT/RUN      # re-hash every file; exit 1 on any difference
    tuneloop archive reproduce ROOT/RUN   # re-run it into ROOT/reproduce/RUN/ and compare

`archive_run(workdir, target, run, recipe, ...)` copies a run folder (minus the entries the
caller names in `skip`), the inputs a re-run needs (`inputs/`, as `recipe` lists them: each
is a path, the name of its copy and the dotted config key that names it; one larger than its
`max_copy_mb` is recorded by path and size, and pinned file by file by sha256 — `pin.py`) and
`inputs/loop.yaml`, the resolved config
with those keys pointed at the copies. `manifest.json` (`records.Manifest`) lists every
file's path, size and sha256, the resolved config, code version, package versions, hardware,
per-phase timings and the lineage (which artifact came from which inputs), all from the run
state it is handed. `MANIFEST.sha256` holds the manifest's own hash, so that a flipped byte
anywhere — an artifact, the manifest, or that file — fails `tuneloop archive verify`.

It takes plain inputs — a folder, paths, a config as a dict, the run state — and knows
nothing of the loop's layout: the loop (`loop/handover.py`) says which workdir entries are
not part of the run (its lock, the archive phase's own folder, quarantined outputs) and which
config keys name inputs and outputs.

The copy is made in a temporary folder beside the target and renamed into place, so an
archive either exists whole or not at all. An archive is never overwritten: a changed re-run
is a new round with its own run id and archive; finding the target already there is only
accepted when it verifies and is this very run (a resume after a crash at the rename).
`verify` refuses links: every archived path must be a plain file inside the archive.

Reproduce a run: `tuneloop run ROOT/RUN/inputs/loop.yaml` writes into `ROOT/reproduce/RUN/`
(outside the archived folder). `tuneloop archive reproduce ROOT/RUN` does that after checking
the archive and its pins, and compares the two rounds (`reproduce.compare_rounds`, pure); the
command lives in the loop (`loop/reproduce.py`), since it runs the loop and reads the report's
and the gate's records.
"""

from __future__ import annotations

from tuneloop.archive.pack import MAX_MODEL_COPY_MB, ArchiveInput, Recipe, archive_run
from tuneloop.archive.pin import check_pin, pin_input
from tuneloop.archive.reproduce import Reproduction, RoundNumbers, compare_rounds, render
from tuneloop.archive.verify import (
    ARCHIVED_FILE,
    ARCHIVED_RUN_DIR,
    MANIFEST,
    MANIFEST_HASH,
    read_archived,
    read_manifest,
    verify_archive,
)
from tuneloop.records.manifest import Archived, InputPin, Manifest

__all__ = [
    "ARCHIVED_FILE",
    "ARCHIVED_RUN_DIR",
    "MANIFEST",
    "MANIFEST_HASH",
    "MAX_MODEL_COPY_MB",
    "ArchiveInput",
    "Archived",
    "InputPin",
    "Manifest",
    "Recipe",
    "Reproduction",
    "RoundNumbers",
    "archive_run",
    "check_pin",
    "compare_rounds",
    "pin_input",
    "read_archived",
    "read_manifest",
    "render",
    "verify_archive",
]
