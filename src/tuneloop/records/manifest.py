"""The archive's records: `manifest.json` (`tuneloop.manifest/3`) and `archived.json`.

The manifest's JSON shape is the one archives have carried since version 1 (field order
included); each version only added fields at the end, with defaults, so an existing archive
reads and verifies unchanged.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from tuneloop.records.base import Record


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class ManifestFile(_Part):
    """One archived file."""

    path: str
    """Path relative to the archive folder (POSIX separators)."""
    size: int
    """Size in bytes."""
    sha256: str
    """sha256 of the file's bytes."""


class PinnedFile(_Part):
    """One file of an input that was recorded instead of copied."""

    sha256: str
    """sha256 of the file's bytes when the run was archived."""
    size: int
    """Size in bytes."""


class InputPin(_Part):
    """An input too large to copy (a base model), pinned so that a re-run can check it is
    reading the very same files."""

    path: str
    """Where it was when the run was archived (a Hugging Face cache snapshot for a Hub id)."""
    repo_id: str | None = None
    """The Hugging Face repo id, when `path` is a snapshot in a Hub cache."""
    revision: str | None = None
    """The snapshot's commit, when `path` is a snapshot in a Hub cache."""
    files: dict[str, PinnedFile]
    """Every file in it (weights, config, tokenizer, …): path relative to `path` (POSIX
    separators; the file's own name for a single file) → sha256 and size."""


class PhaseLineage(_Part):
    """Which artifacts one finished phase produced, from which inputs."""

    phase: str
    """Phase name."""
    inputs: dict[str, str]
    """Input name → sha256, as the run recorded it."""
    outputs: dict[str, str]
    """Output path (relative to the run folder) → sha256."""


class Manifest(Record):
    """Everything an archive holds, and what a re-run needs to reproduce it."""

    KIND = "manifest"
    VERSION = 3
    """v2: `round`, the flywheel round's lineage. v3: `pins`, the files of each input recorded
    instead of copied (a large base model), by sha256, and the Hub repo and commit it came
    from; a v1 or v2 manifest reads with no pins."""

    run_id: str | None
    """The run (round) archived."""
    config: dict[str, Any]
    """The resolved config the run used (original paths)."""
    code_version: str
    """tuneloop's version plus a hash of its source."""
    provenance: dict[str, Any]
    """Machine, package versions, git commit and time of archiving (`provenance.stamp`)."""
    timings_s: dict[str, float | None]
    """Seconds each phase took (None for a phase that did not finish)."""
    lineage: list[PhaseLineage]
    """One entry per finished phase."""
    external_inputs: dict[str, Any]
    """Inputs recorded by path and hash only (too large to copy), and caveats about copies."""
    base_model_sha256: str
    """sha256 over the base checkpoint's files."""
    files: list[ManifestFile]
    """Every archived file but the manifest and its hash file."""
    round: dict[str, Any] | None = None
    """A flywheel round's lineage (`round.json`: parent champion version and descriptor,
    bootstrap or not, gate slice, trigger); None for a one-off run."""
    pins: dict[str, InputPin] = {}
    """Config key (`base_model`) → the pin of the input it names, for each input recorded in
    `external_inputs` instead of copied; `tuneloop archive reproduce` refuses to run when the
    files there differ."""


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
