"""Pin an input the archive records instead of copying (a large base model), and check it.

A base model over `MAX_MODEL_COPY_MB` stays where it was; the manifest then pins it
(`records.InputPin`): its path, the Hugging Face repo id and commit when that path is a Hub
cache snapshot (the caller reads them from the path; the archive knows nothing of the config),
and every file in it by sha256 and size — the same files `sha256_tree` hashed into the run's
`base_model_sha256`, so nothing the loader may read (weights, config, tokenizer, chat template,
remote code) is left out. `tuneloop archive reproduce` re-hashes them before it runs anything
and refuses on any difference: a re-run on other weights is not a reproduction.

Pinning hashes a large base once more at archive time (the run's own hash of it is one digest
over the tree, not a table per file); that is the price of naming the file that changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tuneloop.records import sha256_file
from tuneloop.records.manifest import InputPin, PinnedFile


def pinned_files(path: Path) -> dict[str, PinnedFile]:
    """Every file under `path` (a Hub snapshot's links followed to their blobs), by POSIX path
    relative to it; a single file by its own name."""
    path = Path(path)
    if path.is_file():
        return {path.name: _pinned(path)}
    files = sorted(p for p in path.rglob("*") if p.is_file())
    return {p.relative_to(path).as_posix(): _pinned(p) for p in files}


def _pinned(path: Path) -> PinnedFile:
    return PinnedFile(sha256=sha256_file(path), size=path.stat().st_size)


def pin_input(path: Path, repo_id: str | None = None, revision: str | None = None) -> InputPin:
    return InputPin(path=str(path), repo_id=repo_id, revision=revision, files=pinned_files(path))


def pin_differences(pinned: Mapping[str, PinnedFile], found: Mapping[str, PinnedFile]) -> list[str]:
    """One line per file that is missing, added, or of another size or sha256 than pinned."""
    lines = []
    for name, want in sorted(pinned.items()):
        got = found.get(name)
        if got is None:
            lines.append(f"{name}: missing")
        elif got.size != want.size:
            lines.append(f"{name}: {got.size} bytes, pinned {want.size}")
        elif got.sha256 != want.sha256:
            lines.append(f"{name}: sha256 {got.sha256[:12]}…, pinned {want.sha256[:12]}…")
    lines.extend(f"{name}: not in the pin" for name in sorted(set(found) - set(pinned)))
    return lines


def check_pin(pin: InputPin, path: Path) -> list[str]:
    """The differences between the files at `path` and the pin; hashes only files whose size
    matches (a size already tells a changed multi-gigabyte shard)."""
    if not path.exists():
        return [f"{path}: not found"]
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    root = path if path.is_dir() else path.parent
    found: dict[str, PinnedFile] = {}
    for p in files:
        name = p.relative_to(root).as_posix()
        want, size = pin.files.get(name), p.stat().st_size
        sha = sha256_file(p) if want is not None and want.size == size else ""
        found[name] = PinnedFile(sha256=sha, size=size)
    return pin_differences(pin.files, found)
