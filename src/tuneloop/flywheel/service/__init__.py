"""The champion served behind `tuneloop proxy` and switched without downtime.

- `managed`: `ManagedService` (`ServiceSettings`) — start, switch, stop; adopts what an earlier
  watcher left running;
- `processes`: its processes and state file (`service.json`): spawn, wait, recognise, stop;
- `adoption`: what a new `ManagedService` does with the processes an earlier one left;
- `reserve`: follow the ledger's champion (`reserve_champion`);
- `champion`: how `tuneloop watch` builds it (`flywheel.serve.managed`).

Code outside this package imports from here; the modules import their siblings directly.
"""

from tuneloop.flywheel.service.champion import ChampionService, managed_service, traffic_dir
from tuneloop.flywheel.service.managed import ManagedService
from tuneloop.flywheel.service.processes import ProcessRecord, ServiceState
from tuneloop.flywheel.service.reserve import (
    LedgerChampion,
    Reserved,
    ledger_champion,
    reserve_champion,
)
from tuneloop.flywheel.service.settings import ServiceSettings, ServiceStatus

__all__ = [
    "ChampionService",
    "LedgerChampion",
    "ManagedService",
    "ProcessRecord",
    "Reserved",
    "ServiceSettings",
    "ServiceState",
    "ServiceStatus",
    "ledger_champion",
    "managed_service",
    "reserve_champion",
    "traffic_dir",
]
