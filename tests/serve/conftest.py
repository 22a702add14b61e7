"""Fixtures for the serving tests: a random-init tiny Qwen2 model with a char-level tokenizer.

The tokenizer is built here (no download) and carries a Qwen-style chat template whose turns
end with `<|im_end|>`, which is also the generation config's eos — the same shape as
`examples/arith/model`, so the server code paths are the real ones; only the weights are random.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tuneloop.serve.lifecycle import free_port

from .fake_vllm_env import FAKE_API_SERVER

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_tiny_model(folder: Path, seed: int = 0) -> Path:
    import torch
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import (
        GenerationConfig,
        PreTrainedTokenizerFast,
        Qwen2Config,
        Qwen2ForCausalLM,
    )

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    chars = [chr(i) for i in range(32, 127)] + ["\n"]
    vocab = {t: i for i, t in enumerate(specials + chars)}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<|endoftext|>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), "isolated")
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    tok.chat_template = CHAT_TEMPLATE
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(vocab),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=vocab["<|im_end|>"], pad_token_id=vocab["<|endoftext|>"]
    )
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="session")
def tiny_engine(tiny_model: Path) -> Iterator[Any]:
    """A started batching engine over the tiny model, shared by the in-process tests."""
    from tuneloop.serve.embedded.engine import load_engine

    engine = load_engine(tiny_model, max_batch_size=64, batch_wait_ms=20).start()
    yield engine
    engine.close()


@pytest.fixture
def fake_endpoint() -> Iterator[Callable[..., str]]:
    """Start fake OpenAI servers (the fake `vllm`, answering "42"): `start(model, api_key=None)`
    serves `model` (requiring `api_key` when given) and returns its base URL ending in /v1."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(model: str, api_key: str | None = None) -> str:
        port = free_port("127.0.0.1")
        env = {k: v for k, v in os.environ.items() if k != "VLLM_API_KEY"}
        if api_key is not None:
            env["VLLM_API_KEY"] = api_key
        argv = [sys.executable, str(FAKE_API_SERVER), "--model", model, "--port", str(port)]
        procs.append(
            subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        )
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        return f"{base}/v1"

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait()
