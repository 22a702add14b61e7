"""Re-serve the ledger's champion: what the watcher calls after a promoted round.

    service = ManagedService(ServiceSettings(state_dir=..., port=8100, log_dir=...))
    done = reserve_champion(service, ledger_path)   # Reserved(action, version, previous, seconds)

`action` is `started` (nothing was served), `switched` (a new version replaced the served
one without downtime, see `managed.py`) or `unchanged` (the ledger's champion is already
served and answering). A champion that cannot be served is refused with the old one still
serving, and the error says why; calling again retries it (a promotion is rare, so nothing
remembers a refusal).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NamedTuple

from tuneloop.errors import InputError
from tuneloop.flywheel.service.managed import ManagedService


@dataclass(frozen=True)
class Reserved:
    """What `reserve_champion` did."""

    action: Literal["started", "switched", "unchanged"]
    version: int
    previous: int | None
    """The version served before (None when nothing was)."""
    seconds: float
    """Wall time of the start or switch (0 when unchanged)."""


def reserve_champion(service: ManagedService, ledger_path: Path) -> Reserved:
    """Serve the ledger's current champion: start the service, switch it, or leave it.

    Raises InputError when the ledger has no champion or it is not one local checkpoint, and
    the error of a refused start or switch (the old champion still served) otherwise.
    """
    version, model_dir, adapter = ledger_champion(ledger_path)
    before = service.status()
    if before.running and before.version == version:
        service.log(f"champion v{version} is already served; nothing to do")
        return Reserved("unchanged", version, version, 0.0)
    began = time.monotonic()
    if before.proxy_pid is None:
        service.start(model_dir, version, adapter=adapter)
        action: Literal["started", "switched"] = "started"
    else:
        service.switch_to(model_dir, version, adapter=adapter)
        action = "switched"
    return Reserved(action, version, before.version, time.monotonic() - began)


class LedgerChampion(NamedTuple):
    """The ledger's current champion as a managed service serves it."""

    version: int
    model_dir: Path
    """The checkpoint folder (an adapter champion's base), as the descriptor records it."""
    adapter: Path | None = None
    """A LoRA adapter served on `model_dir` without merging (`serve.challenger: adapter`)."""


def ledger_champion(ledger_path: Path) -> LedgerChampion:
    """The ledger's current champion: its version, checkpoint folder and adapter, if any. The
    folders are the descriptor's `path` and `adapter.path` as recorded (the loop records
    absolute paths)."""
    from tuneloop.gate.promotion import champion_history

    history = champion_history(Path(ledger_path))
    if not history:
        raise InputError(
            f"{ledger_path}: the ledger has no champion to serve yet; a first round "
            "bootstraps one (flywheel.bootstrap)"
        )
    last = history[-1]
    descriptor = last.descriptor
    if descriptor.get("kind", "single") != "single" or not descriptor.get("path"):
        raise InputError(
            f"{ledger_path}: champion v{last.version} is not one local checkpoint "
            f"(kind {descriptor.get('kind', 'single')!r}, path {descriptor.get('path')!r}); "
            "a managed service serves a single checkpoint folder"
        )
    adapter = (descriptor.get("adapter") or {}).get("path")
    return LedgerChampion(
        last.version, Path(descriptor["path"]), Path(adapter) if adapter else None
    )
