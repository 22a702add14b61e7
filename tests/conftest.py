"""Fixtures every test folder shares: the family matrix's checkpoints, built once a session."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

FAMILIES_DIR = Path(__file__).resolve().parents[1] / "examples" / "families"


def family_names() -> list[str]:
    """The families `examples/families/build_families.py` builds, in its order."""
    if str(FAMILIES_DIR) not in sys.path:
        sys.path.insert(0, str(FAMILIES_DIR))
    from build_families import FAMILIES

    return list(FAMILIES)


@pytest.fixture(scope="session")
def family_model(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """`family_model("llama")`: that family's checkpoint, built on first use (seconds; the
    Mistral one, with its 131k vocabulary, about 20 s) and shared by every test after."""
    import torch

    from tuneloop.train.common import quiet

    quiet()
    torch.set_num_threads(1)
    family_names()
    from build_families import build_family

    root = tmp_path_factory.mktemp("families")
    built: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in built:
            built[name] = build_family(name, root / name)
        return built[name]

    return get


@pytest.fixture(autouse=True)
def _forget_keys_read() -> object:
    """Every API key `read_api_key` returns is remembered for the rest of the process so that
    writers redact it (`tuneloop.envkeys`). A test's keys must not outlive it: hypothesis draws
    key values from the string constants of the code under test, so a key such as
    `request_hash` would otherwise redact that field's name out of every later record."""
    from tuneloop import envkeys

    before = set(envkeys._known)
    yield
    envkeys._known.clear()
    envkeys._known.update(before)
