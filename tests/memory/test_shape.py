"""`memory/shape.py`: the counts a memory estimate starts from, against the real modules.

Each family of the matrix (`examples/families`) is built from its config on the meta device
(nothing allocated, no tokenizer: a 640-entry vocabulary stands in) and its parameters and
PEFT's `all-linear` LoRA parameters are counted; the shape's arithmetic must agree.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from tuneloop.memory import model_shape

FAMILIES_DIR = Path(__file__).resolve().parents[2] / "examples" / "families"
QWEN2_05B = {
    "model_type": "qwen2",
    "hidden_size": 896,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "intermediate_size": 4864,
    "vocab_size": 151936,
    "tie_word_embeddings": True,
    "max_position_embeddings": 32768,
    "sliding_window": 32768,
    "use_sliding_window": False,
}
"""Qwen2-0.5B's config.json, the numbers that matter."""


def family_config(name: str) -> Any:
    """The family's config with the matrix's small shape (`build_families.model_config`)."""
    if str(FAMILIES_DIR) not in sys.path:
        sys.path.insert(0, str(FAMILIES_DIR))
    from build_families import FAMILIES
    from transformers import AutoConfig

    family = FAMILIES[name]
    if family.model_type == "gpt2":
        shape = {"vocab_size": 640, "n_embd": 64, "n_layer": 2, "n_head": 2, "n_positions": 512}
    else:
        shape = {
            "vocab_size": 640,
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "max_position_embeddings": 512,
        }
    shape["tie_word_embeddings"] = family.tied
    return AutoConfig.for_model(family.model_type, **{**shape, **family.shape})


@pytest.mark.parametrize(
    "name", ["llama", "qwen2", "qwen3", "mistral", "gemma3", "phi3", "olmo2", "qwen3_moe", "gpt2"]
)
def test_parameters_agree_with_the_modules(name: str) -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    config = family_config(name)
    shape = model_shape(config.to_dict())
    assert shape is not None
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    real = sum(p.numel() for p in model.parameters())
    # biases and q/k norms are left out: under 2% here, far less on a real model
    assert shape.parameters == pytest.approx(real, rel=0.02)
    lora = LoraConfig(r=16, target_modules="all-linear", task_type="CAUSAL_LM")
    with torch.device("meta"):
        adapted = get_peft_model(model, lora)
    adapter = sum(p.numel() for n, p in adapted.named_parameters() if "lora_" in n)
    if name in ("phi3", "gpt2"):  # fused q/k/v (and gate/up): counted apart, an upper bound
        assert adapter <= shape.lora_parameters(16, ()) <= 1.3 * adapter
    else:
        assert shape.lora_parameters(16, ()) == adapter


def test_a_real_config_reads_as_its_model_card_says() -> None:
    shape = model_shape(QWEN2_05B)
    assert shape is not None
    assert shape.parameters == pytest.approx(494_032_768, rel=0.001)  # Qwen2-0.5B's own count
    # 2 (k, v) × 24 layers × 2 kv heads × 64 head_dim = 6,144 elements per position;
    # use_sliding_window false: every layer caches every position
    assert shape.kv_elements(rows=1, context=1) == 6144
    assert shape.sliding_layers == 0
    assert shape.lora_parameters(16, ("q_proj", "v_proj")) == 16 * 24 * (896 + 896 + 896 + 128)


def test_sliding_window_layers_stop_caching_at_their_window() -> None:
    config = {**QWEN2_05B, "use_sliding_window": True, "sliding_window": 1024}
    config["layer_types"] = ["sliding_attention"] * 20 + ["full_attention"] * 4
    shape = model_shape(config)
    assert shape is not None and shape.sliding_layers == 20
    per_layer = 2 * 2 * 64
    assert shape.kv_elements(1, 4096) == per_layer * (4 * 4096 + 20 * 1024)


def test_a_config_without_the_numbers_is_no_shape() -> None:
    assert model_shape({"model_type": "qwen2", "vocab_size": 8}) is None
    nested = model_shape({"text_config": QWEN2_05B, "model_type": "gemma3"})
    assert nested is not None and nested.hidden == 896
