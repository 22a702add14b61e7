"""`scripts/gpu-check` on a machine without an NVIDIA GPU: the inventory, then a clear refusal.

The GPU part (vLLM serving, GPU training, throughput) runs only where a GPU is; this test is
what a CPU machine can check: the script runs, reports what is installed and exits 1 naming
what is missing, without starting the loop or writing a run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu-check"


def gpu_present() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0


@pytest.mark.skipif(gpu_present(), reason="an NVIDIA GPU is present: run scripts/gpu-check")
def test_without_a_gpu_it_reports_the_inventory_and_says_no_gpu(tmp_path: Path) -> None:
    env = {**os.environ, "GPU_CHECK_DIR": str(tmp_path / "run"), "TMPDIR": str(tmp_path)}
    done = subprocess.run([str(SCRIPT)], capture_output=True, text=True, env=env, timeout=120)
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    for line in ("gpu: none", "torch: ", "vllm: ", "transformers: ", "vllm environment: "):
        assert line in out, line
    assert "gpu-check: no NVIDIA GPU on this machine" in out
    assert "gpu-check: missing: an NVIDIA GPU" in out
    assert "Traceback" not in out + done.stderr
    assert not (tmp_path / "run").exists() and not list(tmp_path.iterdir())
