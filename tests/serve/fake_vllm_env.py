"""A fake vLLM environment: a folder whose `bin/python` runs this interpreter with the fake
`vllm` package (tests/serve/fake_vllm, answering "42") first on its path, so the `vllm` backend
starts `python -m vllm.entrypoints.openai.api_server` from it exactly as from a real one."""

from __future__ import annotations

import sys
from pathlib import Path

FAKE_PACKAGE_ROOT = Path(__file__).parent / "fake_vllm"
FAKE_API_SERVER = FAKE_PACKAGE_ROOT / "vllm" / "entrypoints" / "openai" / "api_server.py"


def make_fake_vllm_env(folder: Path, *, with_vllm: bool = True) -> Path:
    """A venv-shaped `folder` (bin/python); without vLLM when `with_vllm` is False."""
    python = folder / "bin" / "python"
    python.parent.mkdir(parents=True, exist_ok=True)
    path = f"export PYTHONPATH={FAKE_PACKAGE_ROOT}${{PYTHONPATH:+:$PYTHONPATH}}\n"
    python.write_text(f'#!/bin/sh\n{path if with_vllm else ""}exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    return folder
