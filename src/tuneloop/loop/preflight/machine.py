"""This machine's memory, as the memory check compares plans with it.

RAM from psutil; the GPU's from `nvidia-smi`, because a check imports no torch (it stays a
one-second command). Training runs on the GPU where `torch.cuda.is_available()` will say
so: `nvidia-smi` lists one, `CUDA_VISIBLE_DEVICES` does not hide it and torch is not a CPU
build (`2.13.0+cpu`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version


@dataclass(frozen=True)
class Machine:
    ram: int
    """Total RAM in bytes."""
    ram_free: int
    """RAM other processes leave free now (psutil's `available`)."""
    gpu: int | None = None
    """Memory of the smallest visible GPU in bytes; None: training and serving run on CPU."""

    def capacity(self, gpu: bool) -> tuple[int, str]:
        """(bytes, what they are) of the memory a process on the GPU, or on CPU, can use."""
        if gpu and self.gpu is not None:
            return self.gpu, "GPU memory"
        return self.ram, "RAM"


def read_machine() -> Machine:
    import psutil

    memory = psutil.virtual_memory()
    return Machine(ram=int(memory.total), ram_free=int(memory.available), gpu=gpu_memory())


def gpu_memory() -> int | None:
    """The smallest visible GPU's memory in bytes, or None (module docstring)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and not visible.strip() or shutil.which("nvidia-smi") is None:
        return None
    try:
        if "+cpu" in version("torch"):
            return None
    except PackageNotFoundError:
        return None
    query = ["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"]
    try:
        done = subprocess.run(query, capture_output=True, text=True, timeout=10, check=True)
        mib = [int(line) for line in done.stdout.split() if line.strip().isdigit()]
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    if visible is not None and all(p.strip().isdigit() for p in visible.split(",")):
        mib = [mib[int(p)] for p in visible.split(",") if int(p) < len(mib)]
    return min(mib) * 2**20 if mib else None
