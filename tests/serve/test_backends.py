"""The vllm and external backends against a fake `vllm` executable (stdlib HTTP server)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import openai
import pytest

from tuneloop.errors import InputError, PhaseFailed
from tuneloop.serve import serving
from tuneloop.serve.backends import VLLM_KEYS, select_options, vllm_argv

FAKE_VLLM = Path(__file__).parent / "fake_vllm" / "vllm"
KEY = "sk-test-0123456789abcdef"


@pytest.fixture
def fake_vllm_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The fake's shebang asks for python3: make that this interpreter.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "python3").symlink_to(sys.executable)
    monkeypatch.setenv("PATH", f"{FAKE_VLLM.parent}:{bindir}:{os.environ['PATH']}")


def test_vllm_argv_carries_every_setting() -> None:
    opts = {
        "dtype": "bfloat16",
        "max_model_len": 4096,
        "gpu_memory_utilization": 0.8,
        "tensor_parallel_size": 2,
        "data_parallel_size": 4,
        "extra_args": ["--enforce-eager"],
    }
    assert vllm_argv("/m", "127.0.0.1", 8011, opts) == [
        "vllm", "serve", "/m", "--host", "127.0.0.1", "--port", "8011",
        "--dtype", "bfloat16", "--max-model-len", "4096",
        "--gpu-memory-utilization", "0.8", "--tensor-parallel-size", "2",
        "--data-parallel-size", "4", "--enforce-eager",
    ]  # fmt: skip
    assert "--max-model-len" not in vllm_argv("/m", "h", 1, {})
    assert "--enable-auto-tool-choice" not in vllm_argv("/m", "h", 1, {})
    tools = vllm_argv("/m", "h", 1, {"tool_call_parser": "hermes"})
    assert tools[-3:] == ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
    flat = select_options({"vllm": {"tool_call_parser": "hermes"}}, "vllm", VLLM_KEYS)
    assert flat == {"tool_call_parser": "hermes"}  # loop.yaml's serve.vllm.tool_call_parser


def test_options_flatten_the_backend_section_and_refuse_unknown_keys() -> None:
    opts = {"max_batch_size": 8, "vllm": {"dtype": "half"}, "external": {"pre": {"model": "x"}}}
    assert select_options(opts, "vllm", {"dtype"}) == {"dtype": "half"}
    assert select_options(opts, "embedded", {"max_batch_size"}) == {"max_batch_size": 8}
    with pytest.raises(InputError, match="did you mean 'max_batch_size'"):
        select_options({"max_batch_sise": 8}, "embedded", {"max_batch_size"})


def test_vllm_backend_serves_through_the_fake(
    fake_vllm_on_path: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_VLLM_KEY", KEY)
    log = tmp_path / "vllm.log"
    opts = {"dtype": "float16", "extra_args": ["--enforce-eager"], "api_key_env": "TEST_VLLM_KEY"}
    with serving("org/model", "vllm", log_path=log, options=opts, startup_timeout_s=60) as ep:
        assert ep.api_key == KEY and ep.model == "org/model"
        client = openai.OpenAI(base_url=ep.base_url, api_key=ep.api_key)
        reply = client.chat.completions.create(
            model=ep.model, messages=[{"role": "user", "content": "6 * 7?"}], n=2
        )
        pid = ep.pid
    assert [c.message.content for c in reply.choices] == ["42", "42"]
    text = log.read_text()
    assert "serve org/model" in text and "--dtype float16 " in text and "--enforce-eager" in text
    assert KEY not in text and KEY not in repr(ep)
    assert pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_vllm_backend_loads_the_contract_generation_config(
    fake_vllm_on_path: None, tmp_path: Path
) -> None:
    import json

    from tuneloop.serve import Decoding

    log = tmp_path / "vllm.log"
    contract = Decoding((0, 2), {"do_sample": False, "max_new_tokens": 8})
    with serving("org/model", "vllm", log_path=log, decoding=contract) as ep:
        assert ep.decoding_applied
        argv = next(line for line in log.read_text().splitlines() if "fake vllm argv" in line)
        folder = Path(argv.split("--generation-config ")[1].split()[0])
        served = json.loads((folder / "generation_config.json").read_text())
    assert served == {"do_sample": False, "eos_token_id": [0, 2], "max_new_tokens": 8}
    assert not folder.exists()


def test_vllm_startup_failure_shows_its_log(
    fake_vllm_on_path: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_VLLM_FAIL", "1")
    with pytest.raises(PhaseFailed, match="failing on purpose"), serving("m", "vllm"):
        pass


def test_vllm_missing_executable_is_an_input_error() -> None:
    opts = {"executable": "/nonexistent/vllm"}
    with (
        pytest.raises(InputError, match="serve.vllm.executable"),
        serving("m", "vllm", options=opts),
    ):
        pass


@pytest.fixture
def external_server(fake_endpoint: Callable[..., str]) -> str:
    return fake_endpoint("ext-model", api_key=KEY)


def test_external_backend_reads_the_key_from_env_and_never_writes_it(
    external_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXT_KEY", KEY)
    log = tmp_path / "ext.log"
    opts = {
        "base_url": external_server,
        "pre": {"model": "ext-model"},
        "post": {"model": "other-model"},
        "api_key_env": "EXT_KEY",
    }
    with serving("ignored", "external", log_path=log, options=opts, arm="pre") as ep:
        assert (ep.model, ep.pid, ep.api_key) == ("ext-model", None, KEY)
        reply = openai.OpenAI(base_url=ep.base_url, api_key=ep.api_key).completions.create(
            model=ep.model, prompt="6 * 7 =", n=3
        )
    assert [c.text for c in reply.choices] == ["42"] * 3
    assert "EXT_KEY" in log.read_text() and KEY not in log.read_text()


def test_external_backend_refuses_a_wrong_or_missing_key(
    external_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    opts = {
        "base_url": external_server,
        "pre": {"model": "ext-model"},
        "post": {"model": "other-model"},
        "api_key_env": "EXT_KEY",
    }
    monkeypatch.delenv("EXT_KEY", raising=False)
    with (
        pytest.raises(InputError, match="EXT_KEY is not set"),
        serving("x", "external", options=opts, arm="pre"),
    ):
        pass
    monkeypatch.setenv("EXT_KEY", "sk-wrong-key")
    refused = pytest.raises(PhaseFailed, match="HTTP 401")
    with refused as info, serving("x", "external", options=opts, arm="pre", startup_timeout_s=10):
        pass
    assert "sk-wrong-key" not in str(info.value)


def test_serve_max_model_len_reaches_the_embedded_and_the_vllm_command_line() -> None:
    from tuneloop.serve.backends import EMBEDDED_KEYS, embedded_argv

    opts = select_options({"max_model_len": 192}, "embedded", EMBEDDED_KEYS)
    argv = embedded_argv(Path("/m"), "127.0.0.1", 0, opts)
    assert argv[argv.index("--max-model-len") + 1] == "192"
    argv = vllm_argv(
        "/m", "127.0.0.1", 8000, select_options({"max_model_len": 192}, "vllm", VLLM_KEYS)
    )
    assert argv[argv.index("--max-model-len") + 1] == "192"
