"""`base_model: org/name`: a Hugging Face Hub id, resolved from the local cache, never downloaded.

A value that reads as a repo id (`org/name`, optionally `@revision`) and is not a folder beside
the YAML file names a model in the Hugging Face cache (`HF_HUB_CACHE`, or `HF_HOME/hub`, or
`~/.cache/huggingface/hub`). `resolve_cached` finds its snapshot folder through
`huggingface_hub.snapshot_download(local_files_only=True)` — the library's own reading of the
cache layout (`models--org--name/refs/<revision>` → `snapshots/<commit>/`) — so the loop
reads the same files `from_pretrained` would, and nothing touches the network whatever
`HF_HUB_OFFLINE` says. A name that is not cached is one line naming the cache looked in.

The snapshot folder's path holds the commit (`…/snapshots/<sha>/`), which the run records as
the base's path; `hub_pin` reads it back for the archive manifest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

HUB_ID = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+?)(?:@(?P<revision>[\w./-]+))?$")


def hub_id(value: str) -> tuple[str, str | None] | None:
    """(repo id, revision or None) when `value` reads as a Hub id, else None."""
    match = HUB_ID.match(value)
    if match is None or value.startswith(("./", "../")) or value.endswith("/"):
        return None
    return match["repo"], match["revision"]


def cache_dir() -> Path:
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def resolve_cached(repo_id: str, revision: str | None = None) -> Path:
    """The cached snapshot folder of `repo_id` at `revision` (default: the cached `main`);
    ValueError naming the cache when it is not there."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        folder = snapshot_download(repo_id, revision=revision, local_files_only=True)
    except (LocalEntryNotFoundError, FileNotFoundError, OSError) as err:
        at = f" at revision {revision}" if revision else ""
        raise ValueError(
            f"{repo_id}{at} is not in the Hugging Face cache {cache_dir()} (tuneloop never "
            "downloads: fetch it there with `hf download`, or set HF_HOME, or give a folder)"
        ) from err
    path = Path(folder)
    if not (path / "config.json").is_file():
        raise ValueError(f"{repo_id}: the cached snapshot {path} has no config.json")
    return path


@dataclass(frozen=True)
class HubPin:
    repo_id: str
    revision: str
    """The snapshot's commit."""


def hub_pin(path: Path) -> HubPin | None:
    """The repo id and commit of a folder inside a Hub cache (`models--org--name/snapshots/
    <commit>`), else None."""
    parts = Path(path).resolve().parts
    for i in range(len(parts) - 2):
        if parts[i].startswith("models--") and parts[i + 1] == "snapshots":
            return HubPin(parts[i].removeprefix("models--").replace("--", "/"), parts[i + 2])
    return None
