"""One torchrun rank of a multi-process training run (launched by `launch.launch_workers`).

Run: `python -m torch.distributed.run --nproc_per_node 2 -m tuneloop.train.distributed.worker
SPEC.json` (or under `accelerate launch`).
Each rank reads the same spec, and TRL/accelerate pick up the process group from torchrun's
environment (gloo on CPU). Only rank 0 writes metrics and the adapter. A tuneloop error (a
non-finite loss, an aborted collapse) is written by rank 0 to `worker_error.txt` in the output
folder, which `launch_workers` raises again in the parent with its message, and the rank exits
with the error's status.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tuneloop.errors import TuneloopError
from tuneloop.records import atomic_write_text
from tuneloop.registry import trainers
from tuneloop.train.common import quiet
from tuneloop.train.data import read_rows
from tuneloop.train.distributed.launch import WORKER_ERROR
from tuneloop.train.settings import TrainSettings


def settings_from_dict(d: dict) -> TrainSettings:
    return TrainSettings.model_validate(d)


def main(argv: list[str] | None = None) -> None:
    args = argv if argv is not None else sys.argv[1:]
    spec = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    quiet()
    fn = trainers.get(spec["method"])
    out_dir = Path(spec["out_dir"])
    try:
        fn(
            Path(spec["base"]),
            read_rows(Path(spec["data"])),
            out_dir,
            settings_from_dict(spec["settings"]),
            **spec["kw"],
        )
    except TuneloopError as err:
        if os.environ.get("RANK", "0") == "0":
            atomic_write_text(out_dir / WORKER_ERROR, str(err))
        print(f"error: {err}", file=sys.stderr, flush=True)
        sys.exit(err.exit_code)
    _leave_process_group()


def _leave_process_group() -> None:
    """Tear the process group down before the interpreter exits. Left to interpreter exit,
    gloo's threads were once seen to abort a rank under load ("terminate called without an
    active exception", exit -6) after training had finished."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
