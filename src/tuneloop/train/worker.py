"""One torchrun rank of a multi-process training run (launched by `run.launch_workers`).

Run: `python -m torch.distributed.run --nproc_per_node 2 -m tuneloop.train.worker SPEC.json`.
Each rank reads the same spec, and TRL/accelerate pick up the process group from torchrun's
environment (gloo on CPU). Only rank 0 writes metrics and the adapter.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tuneloop.registry import trainers
from tuneloop.train.common import quiet
from tuneloop.train.data import read_rows
from tuneloop.train.settings import TrainSettings


def settings_from_dict(d: dict) -> TrainSettings:
    return TrainSettings.model_validate(d)


def main(argv: list[str] | None = None) -> None:
    args = argv if argv is not None else sys.argv[1:]
    spec = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    quiet()
    fn = trainers.get(spec["method"])
    fn(
        Path(spec["base"]),
        read_rows(Path(spec["data"])),
        Path(spec["out_dir"]),
        settings_from_dict(spec["settings"]),
        **spec["kw"],
    )


if __name__ == "__main__":
    main()
