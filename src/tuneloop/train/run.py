"""`train`: validate, check hygiene, train (in process or under torchrun), record, publish.

Order: read and validate the data and refuse contamination *before* loading any model; train
into a temporary folder beside `out_dir`; write `train_settings.json` (a versioned record with
data sha256, base model hash and the contamination allowance); then rename the folder into
place, so `out_dir` is either absent or a complete adapter. With `nproc > 1` the training
itself runs in `python -m torch.distributed.run --nproc_per_node N -m tuneloop.train.worker`
(gloo on CPU); everything else stays in this process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from tuneloop.errors import InputError, PhaseFailed
from tuneloop.records import sha256_file, sha256_tree, write_record
from tuneloop.registry import trainers
from tuneloop.train.common import quiet
from tuneloop.train.data import read_rows
from tuneloop.train.hygiene import check_contamination
from tuneloop.train.settings import TrainRunRecord, TrainSettings

SETTINGS_FILE = "train_settings.json"


def check_base(base: Path) -> None:
    if not (Path(base) / "config.json").is_file():
        raise InputError(
            f"{base}: not a Hugging Face model folder (no config.json); expected the base "
            "checkpoint (`tuneloop merge` produces one from an adapter)"
        )


def train(
    base: Path,
    data: Path,
    out_dir: Path,
    settings: TrainSettings,
    *,
    suite_paths: Sequence[Path] = (),
    default_scorer: str = "numeric",
    progress: bool = True,
) -> Path:
    """Train a LoRA adapter on `data` and return its folder (`out_dir`).

    `settings` is loop.yaml's `train:` section (`TrainConfig`): the method, its knobs, the
    process count and the contamination allowance all come from it.
    """
    base, data, out_dir = Path(base), Path(data), Path(out_dir)
    method, nproc = settings.method, settings.nproc
    trainer_fn = trainers.get(method)
    check_base(base)
    if out_dir.exists():
        raise InputError(f"{out_dir}: already exists; choose a new --out or remove it")
    rows = read_rows(data)
    hits = check_contamination(rows, suite_paths, settings.allow_contamination)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".tmp", dir=out_dir.parent))
    try:
        t0 = time.perf_counter()
        quiet()
        kw = {"nproc": nproc, "default_scorer": default_scorer, "progress": progress}
        if nproc > 1:
            launch_workers(method, base, data, tmp, settings, nproc, kw)
        else:
            trainer_fn(base, rows, tmp, settings, **kw)
        if not (tmp / "adapter_config.json").is_file():
            raise PhaseFailed(f"training ({method}) finished without writing an adapter")
        record = TrainRunRecord(
            method=method,
            settings=settings.model_dump(mode="json"),
            base_model=str(base.resolve()),
            base_model_sha256=sha256_tree(base),
            data=str(data.resolve()),
            data_sha256=sha256_file(data),
            data_rows=len(rows),
            allow_contamination=settings.allow_contamination,
            contaminated_rows=hits,
            suite_paths=[str(p) for p in suite_paths],
            nproc=nproc,
            versions=library_versions(),
            seconds=round(time.perf_counter() - t0, 3),
        )
        write_record(tmp / SETTINGS_FILE, record)
        shutil.rmtree(tmp / "trainer", ignore_errors=True)
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


def launch_workers(
    method: str, base: Path, data: Path, tmp: Path, s: TrainSettings, nproc: int, kw: dict
) -> None:
    """Run the training under torchrun with `nproc` processes; PhaseFailed on failure."""
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
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={nproc}",
        "-m",
        "tuneloop.train.worker",
        str(spec_path),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    proc = subprocess.run(cmd, env=env, check=False)
    spec_path.unlink(missing_ok=True)
    if proc.returncode != 0:
        raise PhaseFailed(f"torchrun training exited with status {proc.returncode}: {cmd}")


def library_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("torch", "transformers", "trl", "peft"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "absent"
    return out
