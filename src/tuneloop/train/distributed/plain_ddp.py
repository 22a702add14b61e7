"""DDP on `plain_sft`'s loop: the reference a DiLoCo run is measured against.

Run: `run_ddp(base, data, out, settings, nproc=2)`, which starts
`python -m torch.distributed.run --standalone --nproc_per_node N -m
tuneloop.train.distributed.plain_ddp SPEC.json` (gloo on CPU). Rank r trains on part r of each
global batch (`plain_sft.batch_indices`), the rows DiLoCo replica r trains on, and torch's
`DistributedDataParallel` averages the LoRA gradients every step. A communication hook (the
default allreduce, plus a counter) adds up the bytes of each gradient bucket handed to gloo,
so DDP's figure is counted the same way as DiLoCo's (`diloco_replica.CountingGloo`).

This is not the user's DDP: `train.nproc` runs TRL's trainer under torchrun (`launch.py`).
It exists so that DiLoCo's loss and bytes are compared with DDP on the same loop, the same rows
and the same optimizer (tests/train/distributed/test_diloco.py, benchmarks/diloco.py). Each rank
writes `ddp_rank_<r>.json` (bytes allreduced, final loss of the adapter on the first 512 rows).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tuneloop.errors import PhaseFailed
from tuneloop.records import Record, read_record, write_record
from tuneloop.train.common import quiet
from tuneloop.train.data import read_rows
from tuneloop.train.distributed.plain_sft import PlainSft, batch_indices
from tuneloop.train.settings import TrainSettings


class DdpRankSummary(Record):
    """`ddp_rank_<r>.json`: what one DDP rank of the reference run did."""

    KIND = "ddp_rank"
    VERSION = 1

    rank: int
    """The rank."""
    bytes_allreduced: int
    """Bytes of gradient buckets this rank handed to gloo's allreduce (counted)."""
    allreduce_calls: int
    """Allreduce calls (one per bucket per step)."""
    seconds: float
    """Wall-clock seconds of the training loop."""
    losses: list[float]
    """Training loss of each step on this rank's rows."""
    final_loss: float
    """Loss of the final adapter on the first 512 training rows (token-weighted)."""


def counting_allreduce(state, bucket):  # type: ignore[no-untyped-def]
    """DDP comm hook: torch's default (allreduce, then divide by the world size), counted.

    Unannotated on purpose: DDP refuses a hook whose `bucket` is annotated other than
    `dist.GradBucket`, and under `from __future__ import annotations` that is a string."""
    import torch.distributed as dist

    buf = bucket.buffer()
    state["bytes_allreduced"] += buf.numel() * buf.element_size()
    state["allreduce_calls"] += 1
    world = dist.get_world_size()
    fut = dist.all_reduce(buf, async_op=True).get_future()  # type: ignore[union-attr]
    return fut.then(lambda f: f.value()[0].div_(world))


def rank_main(spec: dict[str, Any]) -> None:
    """One DDP rank: train `settings.steps` steps, then write `ddp_rank_<r>.json`."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    s = TrainSettings.model_validate(spec["settings"])
    if s.torch_threads:
        torch.set_num_threads(s.torch_threads)
    plain = PlainSft(Path(spec["base"]), read_rows(Path(spec["data"])), s)
    model = DistributedDataParallel(plain.model)
    counter = {"bytes_allreduced": 0, "allreduce_calls": 0}
    model.register_comm_hook(counter, counting_allreduce)
    t0 = time.time()
    losses = []
    for g in range(s.steps):
        idx = batch_indices(len(plain.rows), g, s.batch_size, rank, world, s.seed)
        losses.append(plain.step(model, idx, g))
    seconds = time.time() - t0
    out = Path(spec["out_dir"])
    summary = DdpRankSummary(
        **counter,
        rank=rank,
        seconds=round(seconds, 3),
        losses=losses,
        final_loss=plain.eval_loss(),
    )
    write_record(out / f"ddp_rank_{rank}.json", summary)
    dist.destroy_process_group()


def run_ddp(
    base: Path, data: Path, out: Path, s: TrainSettings, nproc: int = 2
) -> list[DdpRankSummary]:
    """Train with DDP on `nproc` processes; each rank's summary (bytes, final loss)."""
    out.mkdir(parents=True, exist_ok=True)
    spec = {"base": str(base), "data": str(data), "out_dir": str(out)}
    spec["settings"] = s.model_dump(mode="json")  # type: ignore[assignment]
    spec_path = out / "ddp_spec.json"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    module = "tuneloop.train.distributed.plain_ddp"
    cmd += [f"--nproc_per_node={nproc}", "-m", module, str(spec_path)]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    proc = subprocess.run(cmd, env=env, check=False, capture_output=True, text=True)
    if proc.returncode != 0:
        raise PhaseFailed(
            f"DDP reference exited with status {proc.returncode}:\n{proc.stderr[-3000:]}"
        )
    return [read_record(out / f"ddp_rank_{r}.json", DdpRankSummary) for r in range(nproc)]


def main() -> None:
    quiet()
    rank_main(json.loads(Path(sys.argv[1]).read_text(encoding="utf-8")))


if __name__ == "__main__":
    main()
