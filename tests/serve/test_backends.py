"""The vllm and external backends against a fake vLLM environment (a stdlib HTTP server
answering "42"; tests/serve/fake_vllm_env.py). The real vLLM: tests/serve/test_vllm_real.py."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import openai
import pytest

from tuneloop.config import ServeConfig, ServerConfig
from tuneloop.endpoint import Decoding
from tuneloop.errors import InputError, PhaseFailed
from tuneloop.serve.adapter import served_adapter
from tuneloop.serve.backends import embedded_argv, vllm_argv
from tuneloop.serving import listed_model, serving
from tuneloop.vllm_env import VllmEnv

from .fake_vllm_env import make_fake_vllm_env

KEY = "sk-test-0123456789abcdef"
GPU = VllmEnv(Path("/env/bin/python"), "0.32.0", cpu=False, source="test")
CPU = VllmEnv(Path("/env/bin/python"), "0.32.0", cpu=True, source="test")
SERVER = ["/env/bin/python", "-m", "vllm.entrypoints.openai.api_server"]


@pytest.fixture
def fake_env(tmp_path: Path) -> Path:
    return make_fake_vllm_env(tmp_path / "fake-vllm-env")


def vllm_config(env: Path | None = None, **vllm: object) -> ServeConfig:
    if env is not None:
        vllm["env"] = str(env)
    return ServeConfig.model_validate({"backend": "vllm", "vllm": vllm})


def external_config(**external: object) -> ServeConfig:
    return ServeConfig.model_validate({"backend": "external", "external": external})


def test_vllm_argv_carries_every_setting() -> None:
    config = vllm_config(
        dtype="bfloat16",
        max_model_len=4096,
        gpu_memory_utilization=0.8,
        seed=7,
        tensor_parallel_size=2,
        data_parallel_size=4,
        extra_args=["--enforce-eager"],
    )
    assert vllm_argv("/m", "127.0.0.1", 8011, config, GPU) == [
        *SERVER, "--model", "/m", "--host", "127.0.0.1", "--port", "8011",
        "--dtype", "bfloat16", "--seed", "7", "--max-model-len", "4096",
        "--gpu-memory-utilization", "0.8", "--tensor-parallel-size", "2",
        "--data-parallel-size", "4", "--enforce-eager",
    ]  # fmt: skip
    defaults = vllm_argv("/m", "h", 1, vllm_config(), GPU)  # the defaults are VllmConfig's own
    assert defaults == [
        *SERVER, "--model", "/m", "--host", "h", "--port", "1", "--dtype", "auto",
        "--seed", "0", "--gpu-memory-utilization", "0.9", "--tensor-parallel-size", "1",
        "--data-parallel-size", "1",
    ]  # fmt: skip
    tools = vllm_argv("/m", "h", 1, vllm_config(tool_call_parser="hermes"), GPU)
    assert tools[-3:] == ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]


def test_a_cpu_build_gets_a_fixed_kv_cache_instead_of_a_share_of_host_memory() -> None:
    def kv_bytes(argv: list[str]) -> int | None:
        flag = "--kv-cache-memory-bytes"
        return int(argv[argv.index(flag) + 1]) if flag in argv else None

    assert kv_bytes(vllm_argv("/m", "h", 1, vllm_config(), CPU)) == 2**30
    assert kv_bytes(vllm_argv("/m", "h", 1, vllm_config(kv_cache_gib=2.5), CPU)) == 5 * 2**29
    assert kv_bytes(vllm_argv("/m", "h", 1, vllm_config(), GPU)) is None
    assert kv_bytes(vllm_argv("/m", "h", 1, vllm_config(kv_cache_gib=4), GPU)) == 4 * 2**30


def test_the_old_executable_key_names_its_replacement() -> None:
    with pytest.raises(ValueError, match="serve.vllm.env"):
        vllm_config(executable="vllm")


def test_the_embedded_command_line_carries_every_server_setting() -> None:
    argv = embedded_argv(Path("/m"), "::1", 0, ServerConfig(max_batch_size=8, threads=2))
    assert argv[argv.index("--host") + 1 : argv.index("--port") + 2] == ["::1", "--port", "0"]
    assert argv[argv.index("--max-batch-size") + 1] == "8"
    assert argv[argv.index("--threads") + 1] == "2"
    # unset settings (None) are left to the server, whose defaults are the same ServerConfig
    assert "--max-model-len" not in argv and "--api-key-env" not in argv


def test_vllm_backend_serves_through_the_fake(
    fake_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_VLLM_KEY", KEY)
    log = tmp_path / "vllm.log"
    config = ServeConfig.model_validate(
        {
            "backend": "vllm",
            "api_key_env": "TEST_VLLM_KEY",
            "startup_timeout_s": 60,
            "vllm": {"env": str(fake_env), "dtype": "float16", "extra_args": ["--enforce-eager"]},
        }
    )
    with serving("org/model", config, log_path=log) as ep:
        assert ep.api_key == KEY and ep.model == "org/model"
        client = openai.OpenAI(base_url=ep.base_url, api_key=ep.api_key)
        reply = client.chat.completions.create(
            model=ep.model, messages=[{"role": "user", "content": "6 * 7?"}], n=2
        )
        pid = ep.pid
    assert [c.message.content for c in reply.choices] == ["42", "42"]
    text = log.read_text()
    assert "--model org/model" in text and "--dtype float16 " in text and "--enforce-eager" in text
    assert KEY not in text and KEY not in repr(ep)
    assert pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_vllm_backend_loads_the_contract_generation_config(fake_env: Path, tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    contract = Decoding((0, 2), {"do_sample": False, "max_new_tokens": 8})
    with serving("org/model", vllm_config(fake_env), log_path=log, decoding=contract) as ep:
        assert ep.decoding_applied
        argv = next(line for line in log.read_text().splitlines() if "fake vllm argv" in line)
        folder = Path(argv.split("--generation-config ")[1].split()[0])
        served = json.loads((folder / "generation_config.json").read_text())
    # no max_new_tokens: vLLM would cap every request's max_tokens at it
    assert served == {"do_sample": False, "eos_token_id": [0, 2]}
    assert not folder.exists()


def test_vllm_startup_failure_shows_its_log(
    fake_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_VLLM_FAIL", "1")
    config = vllm_config(fake_env)
    with pytest.raises(PhaseFailed, match="failing on purpose"), serving("m", config):
        pass


def test_a_missing_vllm_environment_is_an_input_error_naming_the_setup(tmp_path: Path) -> None:
    config = vllm_config(tmp_path / "nowhere")
    refused = pytest.raises(InputError, match="serve.vllm.env: .*`scripts/setup --vllm`")
    with refused, serving("m", config):
        pass


@pytest.fixture
def external_server(fake_endpoint: Callable[..., str]) -> str:
    return fake_endpoint("ext-model", api_key=KEY)


def test_external_backend_reads_the_key_from_env_and_never_writes_it(
    external_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXT_KEY", KEY)
    log = tmp_path / "ext.log"
    config = external_config(
        base_url=external_server,
        pre={"model": "ext-model"},
        post={"model": "other-model"},
        api_key_env="EXT_KEY",
    )
    with serving("ignored", config, log_path=log, arm="pre") as ep:
        assert (ep.model, ep.pid, ep.api_key) == ("ext-model", None, KEY)
        reply = openai.OpenAI(base_url=ep.base_url, api_key=ep.api_key).completions.create(
            model=ep.model, prompt="6 * 7 =", n=3
        )
    assert [c.text for c in reply.choices] == ["42"] * 3
    assert "EXT_KEY" in log.read_text() and KEY not in log.read_text()


def test_external_backend_refuses_a_wrong_or_missing_key(
    external_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    external = {
        "base_url": external_server,
        "pre": {"model": "ext-model"},
        "post": {"model": "other-model"},
        "api_key_env": "EXT_KEY",
    }
    config = external_config(**external)
    monkeypatch.delenv("EXT_KEY", raising=False)
    with (
        pytest.raises(InputError, match="EXT_KEY is not set"),
        serving("x", config, arm="pre"),
    ):
        pass
    monkeypatch.setenv("EXT_KEY", "sk-wrong-key")
    refused = pytest.raises(PhaseFailed, match="HTTP 401")
    config = ServeConfig.model_validate(
        {"backend": "external", "startup_timeout_s": 10, "external": external}
    )
    with refused as info, serving("x", config, arm="pre"):
        pass
    assert "sk-wrong-key" not in str(info.value)


def test_serve_max_model_len_reaches_the_embedded_and_the_vllm_command_line() -> None:
    config = ServeConfig.model_validate({"max_model_len": 192, "vllm": {"max_model_len": 256}})
    argv = embedded_argv(Path("/m"), "127.0.0.1", 0, config)
    assert argv[argv.index("--max-model-len") + 1] == "192"
    argv = vllm_argv("/m", "127.0.0.1", 8000, config, GPU)  # serve.vllm's own comes first
    assert argv[argv.index("--max-model-len") + 1] == "256"
    shared = ServeConfig.model_validate({"max_model_len": 192})  # else serve's reaches vLLM
    argv = vllm_argv("/m", "127.0.0.1", 8000, shared, GPU)
    assert argv[argv.index("--max-model-len") + 1] == "192"


def test_vllm_serves_an_adapter_under_its_own_name(fake_env: Path, tmp_path: Path) -> None:
    folder = tmp_path / "adapter"
    folder.mkdir()
    (folder / "adapter_config.json").write_text('{"peft_type": "LORA", "r": 24}')
    adapter = served_adapter(folder)
    argv = vllm_argv("/m", "h", 1, vllm_config(), GPU, adapter)
    assert argv[argv.index("--enable-lora") :] == [
        "--enable-lora", "--max-loras", "1", "--max-lora-rank", "32",
        "--lora-modules", f"{adapter.name}={folder}",
    ]  # fmt: skip
    log = tmp_path / "server.log"
    with serving("org/model", vllm_config(fake_env), log_path=log, adapter=folder) as ep:
        assert ep.model == adapter.name  # readiness and every request ask the adapter
        # what answered, in the server's words (recorded in each arm's summary)
        listed = {"id": adapter.name, "root": str(folder), "parent": "org/model"}
        assert listed_model(ep) == listed
    assert f"--lora-modules {adapter.name}={folder}" in log.read_text()


def test_a_backend_without_adapter_serving_refuses_an_adapter(tmp_path: Path) -> None:
    refused = pytest.raises(InputError, match="'embedded' serves merged models only")
    with refused, serving("/m", ServeConfig(backend="embedded"), adapter=tmp_path):
        pass


def test_a_context_longer_than_the_models_is_built_long_on_vllm_too(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"max_position_embeddings": 128}')
    within = vllm_argv(tmp_path, "h", 1, ServeConfig(max_model_len=128), GPU)
    assert "--hf-overrides" not in within
    for config in (ServeConfig(max_model_len=192), ServeConfig(vllm={"max_model_len": 192})):
        argv = vllm_argv(tmp_path, "h", 1, config, GPU)
        assert json.loads(argv[argv.index("--hf-overrides") + 1]) == {
            "max_position_embeddings": 192
        }
