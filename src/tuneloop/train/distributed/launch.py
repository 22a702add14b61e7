"""Start the `train.nproc` training processes with torchrun or `accelerate launch`.

Both run `tuneloop.train.distributed.worker SPEC.json` once per process (gloo on CPU, NCCL on
GPUs); the strategy (DDP, FSDP, DeepSpeed) is in the TRL config each rank builds, so the
launcher only starts processes. torchrun: `python -m torch.distributed.run --standalone
--nproc_per_node N`.
accelerate: `python -m accelerate.commands.launch --config_file accelerate.yaml`, with a
config written beside the run. That config always names accelerate's multi-process launcher
(`distributed_type: MULTI_GPU`): deliberately, because for `MULTI_CPU` accelerate starts one
process, or several only through `mpirun`; under the multi-process launcher a CPU rank still
runs on CPU (the TRL config's `use_cpu`) over gloo. The port is a free one picked here, so
two runs on one machine do not collide.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from tuneloop.errors import PhaseFailed
from tuneloop.train.settings import TrainSettings
from tuneloop.train.strategy import bf16_on, on_gpu

ACCELERATE_CONFIG = "accelerate.yaml"

WORKER_ERROR = "worker_error.txt"
"""Rank 0's error message (written by `worker.main`), for this process to raise again."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def accelerate_config(nproc: int, gpu: bool, bf16: bool, port: int) -> dict[str, Any]:
    """The `accelerate launch` config for `nproc` processes on this machine (pure)."""
    return {
        "compute_environment": "LOCAL_MACHINE",
        "distributed_type": "MULTI_GPU",
        "num_machines": 1,
        "machine_rank": 0,
        "num_processes": nproc,
        "main_process_port": port,
        "mixed_precision": "bf16" if bf16 else "no",
        "use_cpu": not gpu,
    }


def launcher_command(s: TrainSettings, spec_path: Path, gpu: bool) -> list[str]:
    """The command that runs the worker under `train.distributed.launcher`."""
    worker = ["-m", "tuneloop.train.distributed.worker", str(spec_path)]
    if s.distributed.launcher == "torchrun":
        return [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={s.nproc}",
            *worker,
        ]
    import yaml

    config = spec_path.with_name(ACCELERATE_CONFIG)
    cfg = accelerate_config(s.nproc, gpu, bf16_on(s, gpu), free_port())
    config.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        str(config),
        *worker,
    ]


def launch_workers(
    method: str, base: Path, data: Path, tmp: Path, s: TrainSettings, kw: dict
) -> None:
    """Run the training in `train.nproc` processes; PhaseFailed on failure."""
    spec = {
        "method": method,
        "base": str(base),
        "data": str(data),
        "out_dir": str(tmp),
        "settings": s.model_dump(mode="json"),
        "kw": kw,
    }
    spec_path = tmp / "worker_spec.json"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    cmd = launcher_command(s, spec_path, on_gpu())
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    proc = subprocess.run(cmd, env=env, check=False)
    spec_path.unlink(missing_ok=True)
    spec_path.with_name(ACCELERATE_CONFIG).unlink(missing_ok=True)
    error = tmp / WORKER_ERROR
    if proc.returncode != 0 and error.is_file():
        message = error.read_text(encoding="utf-8")
        error.unlink()
        raise PhaseFailed(message)
    if proc.returncode != 0:
        raise PhaseFailed(
            f"{s.distributed.launcher} training exited with status {proc.returncode}: {cmd}"
        )
