"""Fixtures for the serving tests: a random-init tiny Qwen2 model with a char-level tokenizer.

The tokenizer is built here (no download) and carries a Qwen-style chat template whose turns
end with `<|im_end|>`, which is also the generation config's eos — the same shape as
`examples/arith/model`, so the server code paths are the real ones; only the weights are random.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

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
    from tuneloop.serve.engine import load_engine

    engine = load_engine(tiny_model, max_batch_size=64, batch_wait_ms=20).start()
    yield engine
    engine.close()
