"""A decoder's shape as plain numbers, read from its config.json: what memory estimates need.

    shape = model_shape(config)       # a config.json's dict; None when it lacks the numbers
    shape.parameters, shape.lora_parameters(16, ()), shape.kv_elements(rows=8, context=512)

The parameter count is arithmetic over the shape (no torch, no weights): embeddings (and an
untied output head, and GPT-2's learned positions), per layer the attention projections
(q: h×q, k and v: h×kv each, o: q×h, with q = heads × head_dim and kv = kv_heads × head_dim),
the MLP (3·h·i gated — SwiGLU's gate, up, down — or 2·h·i for GPT-2's), for mixture-of-experts
layers experts × 3·h·i_expert plus the router (h × experts) and any shared expert, and two
norms of h. Biases and q/k norms are left out: under 2% on the family matrix's tiny models
(`tests/test_memory.py` compares with the meta-device count) and far less on real ones.
Multi-head latent attention (DeepSeek's `kv_lora_rank`) is not modelled: its KV cache is
counted as if it were plain grouped-query attention.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

LORA_NAMES = {
    "q_proj": ("h", "q"),
    "k_proj": ("h", "kv"),
    "v_proj": ("h", "kv"),
    "o_proj": ("q", "h"),
    "gate_proj": ("h", "i"),
    "up_proj": ("h", "i"),
    "down_proj": ("i", "h"),
    "qkv_proj": ("h", "qkv"),
    "gate_up_proj": ("h", "2i"),
    "c_attn": ("h", "3h"),
    "c_fc": ("h", "i"),
    "c_proj": ("h+i", "2h"),  # GPT-2 names the attention's and the MLP's output projection alike
}
"""Linear layers by the names `train.lora.target_modules` uses: (inputs, outputs) per layer."""


@dataclass(frozen=True)
class ModelShape:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    """The dense MLP's width (GPT-2: `n_inner`, 4 × hidden when unset)."""
    vocab: int
    tied: bool
    """The output head shares the input embedding's matrix."""
    gated: bool = True
    """A gated MLP (SwiGLU/GeGLU: gate, up, down); False for GPT-2's two matrices."""
    experts: int = 0
    experts_per_token: int = 0
    expert_intermediate: int = 0
    shared_expert_intermediate: int = 0
    moe_layers: int = 0
    """Layers whose MLP is the mixture of experts (the rest are dense)."""
    positions: int = 0
    """`max_position_embeddings`: the longest context the model was built for (0: unknown)."""
    learned_positions: bool = False
    sliding_window: int | None = None
    sliding_layers: int = 0
    """Layers that attend over the last `sliding_window` positions only (their KV cache stops
    growing there)."""

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    def _attention(self) -> int:
        return 2 * self.hidden * self.q_dim + 2 * self.hidden * self.kv_dim

    def _dense_mlp(self) -> int:
        return (3 if self.gated else 2) * self.hidden * self.intermediate

    def _moe_mlp(self) -> int:
        h = self.hidden
        routed = self.experts * 3 * h * self.expert_intermediate + h * self.experts
        return routed + 3 * h * self.shared_expert_intermediate

    @property
    def layer_parameters(self) -> int:
        """Every block's weights together (attention, MLP or experts, norms)."""
        dense = self.layers - self.moe_layers
        per = self._attention() + 2 * self.hidden
        return dense * (per + self._dense_mlp()) + self.moe_layers * (per + self._moe_mlp())

    @property
    def embedding_parameters(self) -> int:
        """Input embedding, the output head when untied, learned positions."""
        head = 0 if self.tied else self.vocab * self.hidden
        positions = self.positions * self.hidden if self.learned_positions else 0
        return self.vocab * self.hidden + head + positions

    @property
    def parameters(self) -> int:
        return self.embedding_parameters + self.layer_parameters + self.hidden

    def lora_parameters(self, rank: int, targets: tuple[str, ...]) -> int:
        """A LoRA adapter's parameters: rank × (inputs + outputs) of each adapted linear
        layer. `targets` empty means PEFT's `all-linear` (every linear layer of the blocks and
        the fused experts, not the output head); names outside `LORA_NAMES` are counted as
        all-linear, an upper bound."""
        known = [t for t in targets if t in LORA_NAMES]
        sizes = {
            "h": self.hidden,
            "q": self.q_dim,
            "kv": self.kv_dim,
            "i": self.intermediate,
            "qkv": self.q_dim + 2 * self.kv_dim,
            "2i": 2 * self.intermediate,
            "3h": 3 * self.hidden,
            "2h": 2 * self.hidden,
            "h+i": self.hidden + self.intermediate,
        }
        if known and len(known) == len(targets):
            per_layer = sum(sizes[a] + sizes[b] for a, b in (LORA_NAMES[t] for t in known))
        else:
            per_layer = self._all_linear()
        return rank * self.layers * per_layer

    def _all_linear(self) -> int:
        """Inputs + outputs of every linear layer of a block (per unit of rank)."""
        h, q, kv = self.hidden, self.q_dim, self.kv_dim
        attention = (h + q) + 2 * (h + kv) + (q + h)
        dense = (3 if self.gated else 2) * (h + self.intermediate)
        if not self.moe_layers:
            return attention + dense
        # PEFT 0.21 adapts transformers 5's fused expert tensors too: per expert, the
        # gate-up tensor at rank 2r (2r·h + 2i·2r) and the down tensor at rank r (r·i + h·r)
        experts = self.experts * (3 * h + 5 * self.expert_intermediate)
        shared = 3 * (h + self.shared_expert_intermediate) if self.shared_expert_intermediate else 0
        moe = (h + self.experts) + experts + shared
        mixed = self.moe_layers * moe + (self.layers - self.moe_layers) * dense
        return attention + mixed // self.layers

    def kv_elements(self, rows: int, context: int) -> int:
        """Cached keys and values for `rows` sequences of `context` positions: 2 × kv_heads ×
        head_dim per layer and position, sliding-window layers capped at their window."""
        window = min(self.sliding_window or context, context)
        positions = (self.layers - self.sliding_layers) * context + self.sliding_layers * window
        return 2 * self.kv_dim * positions * rows


def _int(config: Mapping[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def model_shape(config: Mapping[str, Any]) -> ModelShape | None:
    """The shape of a config.json (its `text_config` for a multimodal one); None when it
    lacks the hidden size, layers, heads or vocabulary (then nothing is estimated)."""
    nested = config.get("text_config")
    text: Mapping[str, Any] = nested if isinstance(nested, dict) else config
    hidden = _int(text, "hidden_size", "n_embd", "d_model")
    layers = _int(text, "num_hidden_layers", "n_layer", "num_layers")
    heads = _int(text, "num_attention_heads", "n_head")
    vocab = _int(text, "vocab_size")
    if hidden is None or layers is None or heads is None or vocab is None:
        return None
    gpt2 = text.get("model_type") == "gpt2" or "n_embd" in text
    experts = _int(text, "num_experts", "num_local_experts", "n_routed_experts") or 0
    experts = experts if experts > 1 else 0
    intermediate = _int(text, "intermediate_size", "n_inner", "ffn_dim") or 4 * hidden
    dense_layers = len(text.get("mlp_only_layers") or []) + (
        _int(text, "first_k_dense_replace") or 0
    )
    window = _int(text, "sliding_window")
    types = text.get("layer_types") or []
    if window is None or text.get("use_sliding_window") is False:
        sliding = 0
    elif types:
        sliding = sum(1 for t in types if t == "sliding_attention")
    else:
        sliding = layers
    return ModelShape(
        hidden=hidden,
        layers=layers,
        heads=heads,
        kv_heads=_int(text, "num_key_value_heads") or heads,
        head_dim=_int(text, "head_dim") or hidden // heads,
        intermediate=intermediate,
        vocab=vocab,
        tied=bool(config.get("tie_word_embeddings", text.get("tie_word_embeddings"))),
        gated=not gpt2,
        experts=experts,
        experts_per_token=(_int(text, "num_experts_per_tok", "moe_top_k") or 0) if experts else 0,
        expert_intermediate=_int(text, "moe_intermediate_size") or intermediate,
        shared_expert_intermediate=_int(text, "shared_expert_intermediate_size") or 0,
        moe_layers=max(layers - dense_layers, 0) if experts else 0,
        positions=_int(text, "max_position_embeddings", "n_positions") or 0,
        learned_positions=gpt2,
        sliding_window=window if sliding else None,
        sliding_layers=sliding,
    )
