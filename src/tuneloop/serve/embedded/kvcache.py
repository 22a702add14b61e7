"""Reshaping a transformers `DynamicCache` for continuous batching: merge, left-pad, trim.

The running batch and a freshly prefilled group of newcomers each hold a left-padded KV cache
`[batch, heads, seq, head_dim]` per layer. Merging pads the shorter one on the left (zeros,
masked out by the attention mask) and concatenates along the batch dimension; trimming drops
leading positions that are padding for every remaining row, so a batch that is refilled for a
long time does not attend over an ever-growing strip of padding.

Deliberately narrow: only caches whose every layer is a plain `DynamicLayer` (full attention,
no sliding window, no quantisation) are reshaped. Anything else reports `mergeable() == False`
and the engine falls back to starting newcomers only when the running batch is empty.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F


def mergeable(cache: Any) -> bool:
    """Whether `cache` is a DynamicCache of plain full-attention layers we know how to reshape."""
    layers = getattr(cache, "layers", None)
    if not layers:
        return False
    return all(
        type(layer).__name__ == "DynamicLayer" and getattr(layer, "keys", None) is not None
        for layer in layers
    )


def left_pad(cache: Any, width: int) -> None:
    """Prepend `width` zero positions to every layer (in place)."""
    if width <= 0:
        return
    for layer in cache.layers:
        layer.keys = F.pad(layer.keys, (0, 0, width, 0))
        layer.values = F.pad(layer.values, (0, 0, width, 0))


def concat(into: Any, other: Any) -> None:
    """Append `other`'s rows after `into`'s (same sequence length; in place on `into`)."""
    for mine, theirs in zip(into.layers, other.layers, strict=True):
        mine.keys = torch.cat([mine.keys, theirs.keys], dim=0)
        mine.values = torch.cat([mine.values, theirs.values], dim=0)


def trim_left(cache: Any, width: int) -> None:
    """Drop the first `width` positions of every layer (in place)."""
    if width <= 0:
        return
    for layer in cache.layers:
        layer.keys = layer.keys[:, :, width:].contiguous()
        layer.values = layer.values[:, :, width:].contiguous()


def seq_length(cache: Any) -> int:
    return int(cache.layers[0].keys.shape[-2])
