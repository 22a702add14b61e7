"""Where a result came from: machine, package versions, code version, dependency lock, time.

Every number in a report is stamped with these, so that a reviewer can see what produced it.
The lock hash says which `requirements.lock` the checkout was installed from (scripts/setup
installs exactly that file); it is None for an install outside a checkout.
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from tuneloop import __version__

# the repository root when tuneloop runs from a checkout (src/tuneloop/provenance.py)
CHECKOUT = Path(__file__).resolve().parents[2]
LOCK_FILE = "requirements.lock"

PACKAGES = (
    "tuneloop",
    "torch",
    "transformers",
    "tokenizers",
    "trl",
    "peft",
    "accelerate",
    "datasets",
    "numpy",
    "scipy",
    "pydantic",
    "fastapi",
    "uvicorn",
    "httpx",
    "openai",
    "vllm",
)


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def machine_info() -> dict[str, Any]:
    import psutil

    info: dict[str, Any] = {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "gpus": [],
    }
    try:
        import torch

        if torch.cuda.is_available():
            info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except ImportError:
        pass
    return info


def git_commit(path: Path | None = None) -> str | None:
    """The commit of the checkout holding `path` (with `-dirty`), or None outside git."""
    where = path or Path(__file__).resolve().parent
    try:
        sha = subprocess.run(
            ["git", "-C", str(where), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{sha}-dirty" if dirty else sha


def code_version() -> str:
    """tuneloop's version plus a hash of its source, so that edited code redoes phases."""
    src = Path(__file__).resolve().parent
    files = sorted(p for p in src.rglob("*.py") if "__pycache__" not in p.parts)
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in files)).hexdigest()
    return f"{__version__}+{digest[:12]}"


def lock_sha256(root: Path = CHECKOUT) -> str | None:
    """sha256 of the checkout's requirements.lock, or None when there is none.

    A lock is only taken from a folder that also holds pyproject.toml, so that an installed
    (non-editable) tuneloop never reports a stray file found above site-packages.
    """
    lock = root / LOCK_FILE
    if not (root / "pyproject.toml").is_file() or not lock.is_file():
        return None
    return hashlib.sha256(lock.read_bytes()).hexdigest()


def stamp() -> dict[str, Any]:
    return {
        "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "packages": package_versions(),
        "git_commit": git_commit(),
        "lock_sha256": lock_sha256(),
    }
