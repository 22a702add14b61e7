"""Build a random tiny Qwen2 (or Llama) checkpoint with a character-level chat tokenizer.

The real demo model (`examples/arith/model/`) is built elsewhere; tests use this stand-in so
they run without it. Its chat template ends turns with `<|im_end|>` like the real one.
`arch="llama"` builds the same shape as a Llama: a second architecture, built locally, for
tests that claim to work on any Hugging Face causal LM.
"""

from __future__ import annotations

from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def build_tiny_model(
    out: Path, *, seed: int = 0, hidden: int = 32, layers: int = 2, arch: str = "qwen2"
) -> Path:
    """Write a random tiny Qwen2 (or Llama) + tokenizer + generation config to `out`."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import (
        GenerationConfig,
        LlamaConfig,
        LlamaForCausalLM,
        PreTrainedTokenizerFast,
        Qwen2Config,
        Qwen2ForCausalLM,
    )

    config_cls, model_cls = {
        "qwen2": (Qwen2Config, Qwen2ForCausalLM),
        "llama": (LlamaConfig, LlamaForCausalLM),
    }[arch]

    chars = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {tok: i for i, tok in enumerate(SPECIALS)}
    for ch in chars:
        vocab.setdefault(ch, len(vocab))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(SPECIALS)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    fast.chat_template = CHAT_TEMPLATE
    torch.manual_seed(seed)
    cfg = config_cls(
        vocab_size=len(vocab),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        # Large init: with the usual 0.02 the logits are nearly flat and stay so under LoRA.
        initializer_range=0.2,
        bos_token_id=vocab["<|endoftext|>"],
        eos_token_id=vocab["<|im_end|>"],
        pad_token_id=vocab["<|endoftext|>"],
    )
    model = model_cls(cfg)
    model.generation_config = GenerationConfig(
        eos_token_id=vocab["<|im_end|>"], pad_token_id=vocab["<|endoftext|>"]
    )
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    fast.save_pretrained(out)
    return out
