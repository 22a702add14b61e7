"""`serve.backend: auto`: the backend each model gets, by the measured rules."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tuneloop.backend_choice import AUTO_VLLM_BYTES, choose_backend, resolve_serve, weight_bytes
from tuneloop.config import LoopConfig, ServeConfig
from tuneloop.vllm_env import VllmEnv, VllmEnvError

CPU = VllmEnv(Path("/v/bin/python"), "0.32.0", True, "test")
GPU = VllmEnv(Path("/v/bin/python"), "0.11.0", False, "test")


def model(tmp_path: Path, size: int) -> Path:
    folder = tmp_path / f"m{size}"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    with open(folder / "model.safetensors", "wb") as f:
        f.truncate(size)  # sparse: the size on record, no disk written
    return folder


def with_env(monkeypatch: pytest.MonkeyPatch, env: VllmEnv | None) -> None:
    def found(configured: Path | None) -> VllmEnv:
        if env is None:
            raise VllmEnvError("serve.backend: vllm: no vLLM environment")
        return env

    monkeypatch.setattr("tuneloop.backend_choice.find_vllm", found)


def test_a_named_backend_is_kept(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with_env(monkeypatch, CPU)
    big = model(tmp_path, AUTO_VLLM_BYTES)
    assert choose_backend(ServeConfig(backend="embedded"), big).backend == "embedded"


@pytest.mark.parametrize(
    ("env", "size", "backend", "words"),
    [
        (CPU, 4 << 20, "embedded", "4.0 MiB of weights"),
        (CPU, AUTO_VLLM_BYTES - 1, "embedded", "below 1 GiB"),
        (CPU, AUTO_VLLM_BYTES, "vllm", "1.00 GiB of weights: vLLM-CPU is faster"),
        (GPU, 4 << 20, "vllm", "a GPU build of vLLM (0.11.0)"),
        (None, 2 * AUTO_VLLM_BYTES, "embedded", "`scripts/setup --vllm` builds one"),
    ],
)
def test_auto_follows_the_measurement(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    env: VllmEnv | None,
    size: int,
    backend: str,
    words: str,
) -> None:
    with_env(monkeypatch, env)
    choice = choose_backend(ServeConfig(), model(tmp_path, size))
    assert choice.backend == backend and words in choice.reason, choice


def test_an_adapter_challenger_is_served_by_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    with_env(monkeypatch, None)  # preflight then names the missing environment
    assert choose_backend(ServeConfig(challenger="adapter"), "org/m").backend == "vllm"


def test_a_configured_but_broken_environment_is_an_error_not_a_fallback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with_env(monkeypatch, None)
    with pytest.raises(VllmEnvError):
        choose_backend(ServeConfig(vllm={"env": "/nowhere"}), "org/m")


def test_weights_are_counted_in_the_folder_only(tmp_path: Path) -> None:
    folder = model(tmp_path, 1000)
    (folder / "tokenizer.json").write_bytes(b"x" * 500)
    (folder / "sub").mkdir()
    (folder / "sub" / "more.safetensors").write_bytes(b"x" * 500)
    assert weight_bytes(folder) == 1000
    assert weight_bytes("org/model") == weight_bytes(tmp_path / "none") == 0


def test_the_loop_resolves_auto_once_for_its_base(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with_env(monkeypatch, CPU)
    base = model(tmp_path, AUTO_VLLM_BYTES)
    cfg = LoopConfig.model_validate({"base_model": base, "suite": {"path": os.devnull}})
    resolved, choice = resolve_serve(cfg)
    assert resolved.serve.backend == "vllm" and choice is not None
    named = cfg.model_copy(update={"serve": ServeConfig(backend="embedded")})
    assert resolve_serve(named) == (named, None)
