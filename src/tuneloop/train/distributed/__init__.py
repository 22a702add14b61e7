"""Training in more than one process: `train.nproc` workers, DiLoCo replicas, a DDP reference.

- `launch.py` starts `train.nproc` ranks under torchrun or `accelerate launch`, each running
  `worker.py` (the registered trainer, under the strategy of `train/strategy.py`);
- `diloco.py` runs `train.diloco`: torchft's lighthouse and one `diloco_replica.py` process per
  replica group, restarted when it dies;
- `plain_sft.py` is the plain PyTorch SFT loop DiLoCo trains with, and `plain_ddp.py` the DDP
  run on that loop a DiLoCo run is measured against (benchmarks/diloco.py).

`worker`, `diloco_replica` and `plain_ddp` are also the subprocesses' `python -m` entry
modules, so this face never imports them at load time (runpy would warn about, and run, a
second copy): `run_ddp` and `DdpRankSummary` load on first use (PEP 562). Nothing here
imports torch at module level.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tuneloop.lazy import lazy_exports
from tuneloop.train.distributed.diloco import (
    DilocoRunRecord,
    ReplicaSummary,
    check_diloco,
    run_diloco,
)
from tuneloop.train.distributed.launch import launch_workers

if TYPE_CHECKING:
    from tuneloop.train.distributed.plain_ddp import DdpRankSummary, run_ddp

_ENTRY_EXPORTS = {"DdpRankSummary": "plain_ddp", "run_ddp": "plain_ddp"}

__all__ = [
    "DdpRankSummary",
    "DilocoRunRecord",
    "ReplicaSummary",
    "check_diloco",
    "launch_workers",
    "run_ddp",
    "run_diloco",
]


__getattr__ = lazy_exports(__name__, _ENTRY_EXPORTS)
