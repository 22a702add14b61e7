"""A model folder's metadata without weights, for tests whose phases never load a model.

Preflight reads a base's config, tokenizer and chat template (`train/checkpoint/compat/`);
tests that run fake phases (or stop before compute) still need a base that reads as a real
chat model. `write_model_files` writes one: a Qwen2 config.json, a five-token `tokenizers`
vocabulary with `<|im_end|>` as its special end of turn, and a ChatML template.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def write_model_files(folder: Path, **config: Any) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers

    folder.mkdir(parents=True, exist_ok=True)
    vocab = {"<|endoftext|>": 0, "<|im_start|>": 1, "<|im_end|>": 2, "[UNK]": 3, "a": 4}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    tok.save(str(folder / "tokenizer.json"))
    settings = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "vocab_size": 8}
    (folder / "config.json").write_text(json.dumps({**settings, **config}), encoding="utf-8")
    tok_config = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
    (folder / "tokenizer_config.json").write_text(json.dumps(tok_config), encoding="utf-8")
    (folder / "chat_template.jinja").write_text(CHATML, encoding="utf-8")
    return folder
