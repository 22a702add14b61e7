"""The archive's records: `manifest.json` (`tuneloop.manifest/1`) and `archived.json`.

The manifest's JSON shape is the one archives have carried since version 1 (field order
included), so an existing archive reads and verifies unchanged.
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
    VERSION = 2
    """v2: `round`, the flywheel round's lineage."""

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
