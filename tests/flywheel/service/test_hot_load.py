"""Adapter champions hot-loaded into the managed service's vLLM server (`hot_load.py`), on the
fake vLLM (tests/serve/fake_vllm: health, models, completions naming the model asked for,
and vLLM's runtime LoRA routes) behind the real proxy. The real vLLM does the same in
test_managed_vllm.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tuneloop.config import ServeConfig
from tuneloop.flywheel.service import ManagedService, ServiceSettings
from tuneloop.flywheel.service.hot_load import hot_loadable
from tuneloop.flywheel.service.processes import STATE_FILE, ProcessRecord

from ...serve.fake_vllm_env import make_fake_vllm_env

MODEL = Path(__file__).resolve().parents[3] / "examples" / "arith" / "model"


def lora(folder: Path, r: int = 8, weights: bytes = b"w1") -> Path:
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": r}))
    (folder / "adapter_model.safetensors").write_bytes(weights)
    return folder


def answered_as(url: str) -> str:
    """The model a completion through the service's proxy names (the fake names the one it
    was asked for)."""
    body = {"model": "champion", "messages": [{"role": "user", "content": "1+1="}]}
    answer = httpx.post(f"{url}/chat/completions", json=body, timeout=30)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["model"])


@pytest.fixture
def settings(tmp_path: Path) -> Iterator[ServiceSettings]:
    env = make_fake_vllm_env(tmp_path / "env")
    yield ServiceSettings(
        state_dir=tmp_path / "state",
        port=0,
        server=ServeConfig(backend="vllm", vllm={"env": str(env)}),
        startup_timeout_s=60,
        drain_timeout_s=10,
    )


def test_a_new_adapter_champion_is_hot_loaded_under_a_new_name(
    settings: ServiceSettings, tmp_path: Path
) -> None:
    lines: list[str] = []
    service = ManagedService(settings, log=lines.append)
    try:
        first = service.start(MODEL, 1, adapter=lora(tmp_path / "a1"))
        assert first.url is not None and answered_as(first.url) == "champion"
        second = service.switch_to(MODEL, 2, adapter=lora(tmp_path / "a2", weights=b"w2"))
        assert second.server_pid == first.server_pid  # no new server
        assert (second.version, second.adapter_dir) == (2, str((tmp_path / "a2").resolve()))
        assert answered_as(first.url) == "champion-v2"
        third = service.switch_to(MODEL, 3, adapter=lora(tmp_path / "a3", weights=b"w3"))
        assert third.server_pid == first.server_pid and answered_as(first.url) == "champion-v3"
        root = f"http://127.0.0.1:{service._state.servers[0].port}"
        listed = httpx.get(f"{root}/v1/models").json()["data"]
        assert [m["id"] for m in listed] == ["champion-base", "champion-v3"]  # old ones unloaded
        # a rank the server was not started to hold gets a new server
        fourth = service.switch_to(MODEL, 4, adapter=lora(tmp_path / "a4", r=64))
        assert fourth.server_pid != first.server_pid and answered_as(first.url) == "champion"
    finally:
        service.stop()
        service.close()
    log = "\n".join(lines)
    assert "drained v1's adapter: nothing in flight" in log
    assert "unloaded adapter 'champion'" in log and "unloaded adapter 'champion-v2'" in log
    assert "gets a new server: rank 64 is above the server's --max-lora-rank 8" in log


def test_a_hot_load_the_crash_interrupted_is_completed_by_the_next_manager(
    settings: ServiceSettings, tmp_path: Path
) -> None:
    """The proxy had switched to v2's adapter, the state file still said v1: the next manager
    takes the proxy's word and the next reserve finishes the hot-load without loading again."""
    service = ManagedService(settings, log=lambda _: None)
    try:
        service.start(MODEL, 1, adapter=lora(tmp_path / "a1"))
        service.switch_to(MODEL, 2, adapter=lora(tmp_path / "a2", weights=b"w2"))
        state = json.loads((settings.state_dir / STATE_FILE).read_text())
        state["servers"][0].update(version=1, lora_name="champion")  # as before the switch
        (settings.state_dir / STATE_FILE).write_text(json.dumps(state))
        service.close()
        lines: list[str] = []
        service = ManagedService(settings, log=lines.append)
        assert service.status().version is None
        done = service.start(MODEL, 2, adapter=tmp_path / "a2")
        assert done.version == 2 and done.url is not None
        assert answered_as(done.url) == "champion-v2"
    finally:
        service.stop()
        service.close()
    assert any("an interrupted hot-load" in line for line in lines)
    assert not any("unloaded" in line for line in lines)  # v2 stayed loaded, v1's is left


def test_what_cannot_be_hot_loaded_says_why(tmp_path: Path) -> None:
    server = ProcessRecord(
        role="server",
        pid=1,
        created=0.0,
        port=1,
        log="",
        model_dir=str(MODEL.resolve()),
        lora_name="champion",
        max_lora_rank=16,
    )
    assert hot_loadable(server, MODEL, 16) is None
    assert hot_loadable(None, MODEL, 8) == "no server is serving"
    assert "another base" in str(hot_loadable(server, tmp_path, 8))
    assert "rank 32 is above" in str(hot_loadable(server, MODEL, 32))
    merged = server.model_copy(update={"lora_name": None})
    assert "not started to take adapters" in str(hot_loadable(merged, MODEL, 8))
