"""The kinds of kernel isolation a sandbox run can get, which one works here, and run uids.

Used by `execute.py`, which probes the kinds once per process (`isolation()`, strongest
first: `strongest(works)`) and runs each program under the one found. The kinds:

- `namespaces` (root): PID, mount, network and IPC namespaces, a file-system jail, and the run's
  own uid (`run_uid`);
- `user_namespaces` (unprivileged, or root where the above is refused): the same namespaces
  inside a user namespace, as its root with no capabilities;
- `own_uid` (root without namespaces): only the run's own uid;
- `none`: no kernel layer; the audit hook and rlimits remain.

A kind without a PID namespace is a degraded mode and says so (`warning`), never silently.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

UID_BASE, UID_SLOTS = 2_000_000_000, 1024
"""Run uids: high above login users and systemd's container range (524288-1879048191)."""
NS_LAYERS = ("pidns", "mountns", "netns", "ipcns")


class Isolation(NamedTuple):
    kind: str
    """namespaces (root), user_namespaces, own_uid (root without namespaces) or none."""
    layers: tuple[str, ...]
    """Kernel layers this kind gives (see `SandboxResult.isolation`)."""
    note: str
    """Why stronger kinds were refused here; empty when none was."""


KINDS = {
    "namespaces": Isolation("namespaces", (*NS_LAYERS, "own_uid"), ""),
    "user_namespaces": Isolation("user_namespaces", ("userns", *NS_LAYERS), ""),
    "own_uid": Isolation("own_uid", ("own_uid",), ""),
    "none": Isolation("none", (), ""),
}


def strongest(works: Callable[[Isolation], str | None]) -> Isolation:
    """The strongest kind for which `works` (a probe run) returns None rather than why it
    failed; the kinds refused on the way are named in the result's `note`."""
    tried = ["namespaces", "user_namespaces", "own_uid"] if os.geteuid() == 0 else []
    tried = tried or ["user_namespaces"]
    notes: list[str] = []
    for kind in tried:
        failure = works(KINDS[kind])
        if failure is None:
            return KINDS[kind]._replace(note="; ".join(notes))
        notes.append(f"{kind}: {failure.strip()[-200:]}")
    return KINDS["none"]._replace(note="; ".join(notes))


def warning(iso: Isolation) -> str | None:
    """Why runs under `iso` are not isolated from each other; None with a PID namespace."""
    if "pidns" in iso.layers:
        return None
    what = {
        "own_uid": "runs have their own uid but see the whole readable file system",
        "none": "runs are NOT isolated from each other, the host's files or leftover processes",
    }[iso.kind]
    why = f" ({iso.note})" if iso.note else ""
    return f"sandbox isolation degraded to '{iso.kind}': {what}{why}"


@contextlib.contextmanager
def run_uid(kind: str) -> Iterator[int | None]:
    """A uid no other run holds now (an flock per slot, shared by all processes here); None
    for the kinds that do not switch uid."""
    if kind not in ("namespaces", "own_uid"):
        yield None
        return
    slots = Path(tempfile.gettempdir()) / "tuneloop-sandbox-uids"
    slots.mkdir(mode=0o700, exist_ok=True)
    for slot in range(UID_SLOTS):
        fd = os.open(slots / str(slot), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        try:
            yield UID_BASE + slot
        finally:
            os.close(fd)
        return
    raise OSError(f"all {UID_SLOTS} sandbox uids are in use")
