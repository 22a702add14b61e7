"""Import the `examples/arith` scripts (a folder of scripts, not a package) for the tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ARITH = Path(__file__).resolve().parents[2] / "examples" / "arith"


def load_script(name: str) -> ModuleType:
    """The script `examples/arith/<name>.py` as a module (siblings importable by name)."""
    if name in sys.modules:
        return sys.modules[name]
    if str(ARITH) not in sys.path:
        sys.path.insert(0, str(ARITH))  # the scripts import each other by bare name
    spec = importlib.util.spec_from_file_location(name, ARITH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def arith_dir() -> Path:
    return ARITH


@pytest.fixture(scope="session")
def make_data() -> ModuleType:
    return load_script("make_data")


@pytest.fixture(scope="session")
def make_agent_data() -> ModuleType:
    return load_script("make_agent_data")


@pytest.fixture(scope="session")
def build_model() -> ModuleType:
    return load_script("build_model")


@pytest.fixture(scope="session")
def build_tokenizer() -> ModuleType:
    return load_script("build_tokenizer")


@pytest.fixture(scope="session")
def measure() -> ModuleType:
    return load_script("measure")


@pytest.fixture(scope="session")
def build_teachers() -> ModuleType:
    return load_script("build_teachers")


@pytest.fixture(scope="session")
def make_replay_traces() -> ModuleType:
    return load_script("make_replay_traces")


@pytest.fixture(scope="session")
def suite_items(make_data: ModuleType) -> list[dict]:
    return make_data.read_items(ARITH / "suite.jsonl")


@pytest.fixture(scope="session")
def train_items(make_data: ModuleType) -> list[dict]:
    return make_data.read_items(ARITH / "train_prompts.jsonl")
