"""Fixtures for the train tests: a random tiny chat model, tiny data, the real demo model."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from tinymodel import build_tiny_model  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
ARITH = REPO / "examples" / "arith"


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch

    from tuneloop.train.common import quiet

    quiet()
    # One thread: on a shared 2-core machine OpenMP threads spin and run ~10x slower.
    torch.set_num_threads(1)
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="session")
def arith_model() -> Path:
    model = ARITH / "model"
    if not (model / "config.json").is_file():
        pytest.skip("examples/arith/model not built (python examples/arith/build_model.py)")
    return model


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def arith_rows(n: int, start: int = 0) -> list[dict]:
    rows = []
    for i in range(start, start + n):
        a, b = i % 10, (i * 7) % 10
        rows.append(
            {
                "id": f"t-{i}",
                "messages": [{"role": "user", "content": f"What is {a} + {b}?"}],
                "answer": str(a + b),
                "scorer": "numeric",
            }
        )
    return rows


@pytest.fixture
def prompts(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "prompts.jsonl", arith_rows(8))
