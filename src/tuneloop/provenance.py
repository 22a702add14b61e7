"""Where a result came from: machine, package versions, code version, dependency lock, time.

Every number in a report is stamped with these, so that a reviewer can see what produced it.
The lock hash says which `requirements.lock` the checkout was installed from (scripts/setup
installs exactly that file); it is None for an install outside a checkout.

The machine's hardware is recorded down to what changes floating-point results on a CPU: the
CPU model, its widest vector instruction set, and the kernels torch dispatches to
(`torch.backends.cpu.get_cpu_capability()`). Two runs of the same code and seeds agree to the
last digit on the same `Hardware`; across hardware they may not (`tuneloop archive reproduce`
tells the two apart).
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, NamedTuple

from tuneloop import __version__

# the repository root when tuneloop runs from a checkout (src/tuneloop/provenance.py)
CHECKOUT = Path(__file__).resolve().parents[2]
LOCK_FILE = "requirements.lock"
CPUINFO = Path("/proc/cpuinfo")

VECTOR_ISAS = (
    "avx512f",
    "avx2",
    "avx",
    "sse4_2",
    "sse4_1",
    "ssse3",
    "sse2",
    "sve2",
    "sve",
    "asimd",
)
"""Vector instruction sets, widest first (x86, then Arm): the first one a CPU has is its ISA."""
VECTOR_FLAGS = (*VECTOR_ISAS, "fma", "f16c", "avx512_bf16", "avx512_vnni", "amx_tile", "amx_bf16")
"""The cpuinfo flags recorded: those that select a different matmul kernel."""

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


class CpuFacts(NamedTuple):
    """What /proc/cpuinfo says of the first CPU."""

    model: str | None
    """`model name` (x86) or `Model`/`Hardware` (Arm), None when absent."""
    flags: frozenset[str]
    """`flags` (x86) or `Features` (Arm)."""


def parse_cpuinfo(text: str) -> CpuFacts:
    """The first CPU's model name and flags from /proc/cpuinfo's text."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip().lower(), value.strip())
    model = next((fields[k] for k in ("model name", "model", "hardware") if fields.get(k)), None)
    flags = fields.get("flags") or fields.get("features") or ""
    return CpuFacts(model, frozenset(flags.split()))


def vector_isa(flags: Collection[str]) -> str | None:
    """The widest vector instruction set among `flags` (`VECTOR_ISAS`), None for none known."""
    return next((isa for isa in VECTOR_ISAS if isa in flags), None)


def torch_cpu_capability() -> str | None:
    """The CPU kernels torch dispatches to (`AVX512`, `AVX2`, `DEFAULT`, …); None without
    torch or with a torch too old to say."""
    try:
        import torch
    except ImportError:
        return None
    get = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", None)
    return str(get()) if get is not None else None


def machine_info() -> dict[str, Any]:
    import psutil

    try:
        cpu = parse_cpuinfo(CPUINFO.read_text(errors="replace"))
    except OSError:  # not Linux
        cpu = CpuFacts(None, frozenset())
    info: dict[str, Any] = {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(),
        "cpu_model": cpu.model or platform.processor() or platform.machine(),
        "cpu_isa": vector_isa(cpu.flags),
        "cpu_flags": [f for f in VECTOR_FLAGS if f in cpu.flags],
        "torch_cpu_capability": torch_cpu_capability(),
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


@dataclass(frozen=True)
class Hardware:
    """What decides whether two runs of the same code and seeds agree to the last digit."""

    cpu_model: str | None
    cpu_isa: str | None
    torch_cpu_capability: str | None
    gpus: tuple[str, ...] = ()

    @property
    def known(self) -> bool:
        """False for a machine recorded before tuneloop recorded its CPU (nothing to compare)."""
        return self.cpu_model is not None or self.torch_cpu_capability is not None

    def describe(self) -> str:
        parts = [
            self.cpu_model or "unknown CPU",
            self.cpu_isa or "ISA unknown",
            f"torch {self.torch_cpu_capability or 'capability unknown'}",
            *self.gpus,
        ]
        return ", ".join(parts)


def hardware(machine: Mapping[str, Any]) -> Hardware:
    """The `Hardware` of a recorded `machine_info()` (as a manifest's `provenance.machine`
    holds it); fields an older tuneloop did not record are None."""
    return Hardware(
        cpu_model=machine.get("cpu_model"),
        cpu_isa=machine.get("cpu_isa"),
        torch_cpu_capability=machine.get("torch_cpu_capability"),
        gpus=tuple(machine.get("gpus") or ()),
    )


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
