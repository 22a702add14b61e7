"""One batched decode: left-padded prompts, KV cache, per-row sampling with per-row generators.

`generate_batch(model, rows, ...)` runs a hand-written sampling loop instead of
`model.generate` because every row carries its own settings and its own random stream:
temperature, top-p, max_tokens, stop strings and seed may differ between rows of one batch.
Each row draws one uniform number per step from a `torch.Generator` seeded with that row's
seed, and picks its token by inverse-CDF over the (top-p truncated, sorted) distribution, so
the random draws a row sees do not depend on which other rows share its batch.

What this preserves and what it does not: a row's random stream is batch-independent, and
greedy rows are argmax; but the logits themselves are computed in a batch with left padding,
and floating-point reductions may differ in the last bits between batch shapes. A token is
therefore identical across batch compositions unless a uniform draw falls within that rounding
error of a CDF boundary (or two logits tie for argmax) — rare, but not impossible. Repeating the
same request alone is bit-for-bit reproducible.

Finished rows are dropped from the batch (and from the KV cache) as they finish, so a short
request sharing a batch with a long one costs nothing after it ends and its result is handed
back at once through `on_done`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch

from tuneloop.serve.rows import Row, RowResult


def sample_next(
    logits: torch.Tensor, temperature: torch.Tensor, top_p: torch.Tensor, uniforms: torch.Tensor
) -> torch.Tensor:
    """Next token per row: argmax where temperature is 0, else nucleus sampling by inverse CDF.

    Nucleus (Holtzman et al. 2020): keep the smallest prefix of tokens sorted by probability
    whose mass reaches `top_p` (the first token is always kept), renormalise, and pick the first
    token whose cumulative mass exceeds `u · mass` for the row's uniform draw `u ∈ [0, 1)`.
    """
    greedy = temperature <= 0
    temp = torch.where(greedy, torch.ones_like(temperature), temperature)
    probs = torch.softmax(logits.float() / temp[:, None], dim=-1)
    sorted_probs, order = probs.sort(dim=-1, descending=True, stable=True)
    before = sorted_probs.cumsum(dim=-1) - sorted_probs
    kept = sorted_probs * (before < top_p[:, None])
    cdf = kept.cumsum(dim=-1)
    target = (uniforms * cdf[:, -1]).unsqueeze(-1)
    pick = torch.searchsorted(cdf, target, right=True).clamp(max=cdf.shape[-1] - 1)
    sampled = order.gather(-1, pick).squeeze(-1)
    return torch.where(greedy, logits.argmax(dim=-1), sampled)


class _RowState:
    """Mutable decode state of one row (index into the original batch)."""

    def __init__(self, index: int, row: Row) -> None:
        self.index = index
        self.row = row
        self.tokens: list[int] = []
        self.generator = torch.Generator().manual_seed(row.seed)

    def uniform(self) -> float:
        return float(torch.rand(1, generator=self.generator).item())


def _left_pad(rows: Sequence[Row], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r.prompt_ids) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        if r.prompt_ids:
            ids[i, width - len(r.prompt_ids) :] = torch.tensor(r.prompt_ids)
            mask[i, width - len(r.prompt_ids) :] = 1
    return ids, mask


def _finish(
    state: _RowState, token: int, eos_ids: frozenset[int], decode: Callable[[list[int]], str]
) -> RowResult | None:
    """Append `token`; return the row's result if it is now finished."""
    state.tokens.append(token)
    if token in eos_ids:
        return RowResult(decode(state.tokens[:-1]), "stop", len(state.tokens))
    if state.row.stops:
        text = decode(state.tokens)
        cuts = [text.find(s) for s in state.row.stops if s in text]
        if cuts:
            return RowResult(text[: min(cuts)], "stop", len(state.tokens))
    if len(state.tokens) >= state.row.max_tokens:
        return RowResult(decode(state.tokens), "length", len(state.tokens))
    return None


@torch.inference_mode()
def generate_batch(
    model: Any,
    rows: Sequence[Row],
    *,
    eos_ids: frozenset[int],
    pad_id: int,
    decode: Callable[[list[int]], str],
    on_done: Callable[[int, RowResult], None],
) -> None:
    """Decode every row to completion, calling `on_done(row_index, result)` as each finishes."""
    states = [_RowState(i, r) for i, r in enumerate(rows)]
    ids, mask = _left_pad(rows, pad_id)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    # transformers 5 renamed `past_key_values` to `cache`; accept both spellings.
    cache_arg = (
        "cache" if "cache" in inspect.signature(model.forward).parameters else ("past_key_values")
    )
    cache = None
    while states:
        out = model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            use_cache=True,
            logits_to_keep=1,
            **{cache_arg: cache},
        )
        cache = getattr(out, cache_arg)
        temps = torch.tensor([s.row.temperature for s in states])
        top_ps = torch.tensor([s.row.top_p for s in states])
        draws = torch.tensor([s.uniform() for s in states])
        tokens = sample_next(out.logits[:, -1, :], temps, top_ps, draws).tolist()
        keep: list[int] = []
        for k, (state, token) in enumerate(zip(states, tokens, strict=True)):
            result = _finish(state, int(token), eos_ids, decode)
            if result is None:
                keep.append(k)
            else:
                on_done(state.index, result)
        if not keep:
            return
        ids = torch.tensor(tokens, dtype=torch.long)[keep].unsqueeze(-1)
        positions = positions[keep, -1:] + 1
        mask = torch.cat([mask[keep], torch.ones((len(keep), 1), dtype=torch.long)], dim=-1)
        if len(keep) < len(states):
            cache.batch_select_indices(torch.tensor(keep))
            states = [states[k] for k in keep]
