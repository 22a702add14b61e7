"""The flywheel history every dashboard test reads (tests/view/world.py), built once."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The loop.yaml of four finished rounds (promoted, rejected, promoted, refused)."""
    from .world import build_world

    return build_world(tmp_path_factory.mktemp("view_world"))
