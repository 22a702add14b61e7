"""Batched decoding with continuous admission: left-padded prompts, one KV cache, per-row sampling.

`DecodeBatch` is the running batch the engine steps: `add(rows)` prefills newcomers as their
own left-padded group and merges them into the running batch's KV cache (`kvcache.py`);
`step()` decodes one token for every running row; finished rows leave the batch (and the cache)
at once and are handed back through `on_done`, so their slots are free at the next step
boundary. `generate_batch(model, rows, ...)` is the static special case: one `add`, then steps
until every row is done.

The loop is hand-written instead of `model.generate` because every row carries its own
settings and its own random stream: temperature, top-p, max_tokens, stop strings and seed may
differ between rows of one batch. Each row draws one uniform number per step from a
`torch.Generator` seeded with that row's seed, and picks its token by inverse-CDF over the
(top-p truncated, sorted) distribution, so the random draws a row sees do not depend on which
other rows share its batch, nor on when it joined.

What this preserves and what it does not: a row's random stream is batch-independent, and
greedy rows are argmax; but the logits themselves are computed in a batch with left padding,
and floating-point reductions may differ in the last bits between batch shapes. A token is
therefore identical across batch compositions unless a uniform draw falls within that rounding
error of a CDF boundary (or two logits tie for argmax) — rare, but not impossible. Repeating the
same request alone is bit-for-bit reproducible.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Hashable, Sequence
from typing import Any, cast

import torch
import torch.nn.functional as F

from tuneloop.serve.embedded.kvcache import concat, left_pad, mergeable, seq_length, trim_left
from tuneloop.serve.embedded.logprobs import at_positions
from tuneloop.serve.embedded.row import Row, RowResult, TokenLogprob


def sample_next(
    logits: torch.Tensor, temperature: torch.Tensor, top_p: torch.Tensor, uniforms: torch.Tensor
) -> torch.Tensor:
    """Next token per row: argmax where temperature is 0, else nucleus sampling by inverse CDF.

    Nucleus (Holtzman et al. 2020): keep the smallest prefix of tokens sorted by probability
    whose mass reaches `top_p` (the first token is always kept), renormalise, and pick the first
    token whose cumulative mass exceeds `u · mass` for the row's uniform draw `u ∈ [0, 1)`.
    """
    greedy = temperature <= 0
    if bool(greedy.all()):  # the common eval case: skip the sort
        return logits.argmax(dim=-1)
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
    """Mutable decode state of one row; `key` is the caller's name for it."""

    def __init__(self, key: Hashable, row: Row) -> None:
        self.key = key
        self.row = row
        self.tokens: list[int] = []
        self.logprobs: list[TokenLogprob] = []
        self.prompt_logprobs: tuple[TokenLogprob, ...] | None = None
        self.constraint = row.constraint() if row.constraint is not None else None
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
        return _result(state, decode(state.tokens[:-1]), "stop")
    if state.row.stops:
        text = decode(state.tokens)
        cuts = [text.find(s) for s in state.row.stops if s in text]
        if cuts:
            return _result(state, text[: min(cuts)], "stop")
    if len(state.tokens) >= state.row.max_tokens:
        return _result(state, decode(state.tokens), "length")
    return None


def _result(state: _RowState, text: str, reason: str) -> RowResult:
    logprobs = tuple(state.logprobs) if state.row.logprobs is not None else None
    count = len(state.tokens)
    return RowResult(text, reason, count, logprobs, state.prompt_logprobs)


def _cache_arg(model: Any) -> str:
    # transformers 5 renamed `past_key_values` to `cache`; accept both spellings.
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


class _Group:
    """Rows sharing one left-padded KV cache, between steps.

    Invariant: `mask` is one column wider than the cache (its last column is `ids`, the token
    each row feeds next), and `positions` are those tokens' positions.
    """

    def __init__(
        self,
        states: list[_RowState],
        ids: torch.Tensor,
        mask: torch.Tensor,
        positions: torch.Tensor,
        cache: Any,
    ) -> None:
        self.states, self.ids, self.mask = states, ids, mask
        self.positions, self.cache = positions, cache

    def select(self, keep: list[int], tokens: list[int]) -> None:
        """Keep rows `keep` (indices into `states`), feeding them `tokens` next."""
        index = torch.tensor(keep)
        self.ids = torch.tensor(tokens, dtype=torch.long)[index].unsqueeze(-1)
        self.positions = self.positions[index, -1:] + 1
        self.mask = torch.cat([self.mask[index], torch.ones((len(keep), 1), dtype=torch.long)], -1)
        if len(keep) < len(self.states):
            self.cache.batch_select_indices(index)
            self.states = [self.states[k] for k in keep]
            self._trim()

    def drop(self, gone: list[int]) -> None:
        """Remove rows `gone` without feeding anything new (cancelled requests)."""
        out = set(gone)
        keep = [k for k in range(len(self.states)) if k not in out]
        index = torch.tensor(keep)
        self.ids, self.positions = self.ids[index], self.positions[index]
        self.mask = self.mask[index]
        self.cache.batch_select_indices(index)
        self.states = [self.states[k] for k in keep]
        self._trim()

    def merge(self, other: _Group) -> None:
        """Append `other`'s rows, padding the shorter cache on the left."""
        mine, theirs = seq_length(self.cache), seq_length(other.cache)
        width = max(mine, theirs)
        left_pad(self.cache, width - mine)
        left_pad(other.cache, width - theirs)
        concat(self.cache, other.cache)
        self.mask = torch.cat(
            [F.pad(self.mask, (width - mine, 0)), F.pad(other.mask, (width - theirs, 0))]
        )
        self.ids = torch.cat([self.ids, other.ids])
        self.positions = torch.cat([self.positions, other.positions])
        self.states = self.states + other.states

    def _trim(self) -> None:
        """Drop leading cache positions that are padding for every remaining row."""
        if not mergeable(self.cache):
            return
        used = self.mask.any(dim=0).nonzero()
        lead = int(used[0]) if len(used) else 0
        if lead:
            trim_left(self.cache, lead)
            self.mask = self.mask[:, lead:]


class DecodeBatch:
    """The rows being decoded together; newcomers join between steps (continuous batching).

    Callbacks run on the caller's thread: `on_token(key, token)` for every token that leaves
    its row unfinished, `on_done(key, result)` once when a row finishes.
    """

    def __init__(
        self,
        model: Any,
        *,
        eos_ids: frozenset[int],
        pad_id: int,
        decode: Callable[[list[int]], str],
        on_done: Callable[[Hashable, RowResult], None],
        on_token: Callable[[Hashable, int], None] | None = None,
    ) -> None:
        self.model = model
        self.eos_ids = eos_ids
        self.pad_id = pad_id
        self.decode = decode
        self.on_done = on_done
        self.on_token = on_token
        self.cache_arg = _cache_arg(model)
        self.running: _Group | None = None

    def __len__(self) -> int:
        return len(self.running.states) if self.running else 0

    @property
    def keys(self) -> list[Hashable]:
        return [s.key for s in self.running.states] if self.running else []

    def can_join(self) -> bool:
        """Whether newcomers may join now: always into an empty batch, else only when the
        running cache is one `kvcache` can merge."""
        return self.running is None or mergeable(self.running.cache)

    @torch.inference_mode()
    def add(self, rows: Sequence[tuple[Hashable, Row]]) -> None:
        """Prefill `rows` (key, row) as one group, sample their first tokens, and merge the
        unfinished ones into the running batch."""
        if not rows:
            return
        if not self.can_join():
            raise RuntimeError("this model's KV cache cannot take rows into a running batch")
        states = [_RowState(key, row) for key, row in rows]
        ids, mask = _left_pad([row for _, row in rows], self.pad_id)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        group = _Group(states, ids, mask, positions, None)
        if self._forward(group, prompt=True) and group.states:
            if self.running is None:
                self.running = group
            else:
                self.running.merge(group)

    @torch.inference_mode()
    def step(self) -> None:
        """Decode one token for every running row."""
        if self.running is not None and not self._forward(self.running):
            self.running = None

    def drop(self, keys: set[Hashable]) -> None:
        """Remove the rows named by `keys` from the batch (their callbacks are not called)."""
        if self.running is None:
            return
        gone = [k for k, s in enumerate(self.running.states) if s.key in keys]
        if len(gone) == len(self.running.states):
            self.running = None
        elif gone:
            self.running.drop(gone)

    def _forward(self, group: _Group, prompt: bool = False) -> bool:
        """Run the model on `group`, sample, finish rows; False when no row is left. A
        prefill (`prompt`) keeps every position's logits when a row asks for its prompt's
        log-probabilities, else only the last."""
        states = group.states
        echo = prompt and any(s.row.prompt_logprobs is not None for s in states)
        out = self.model(
            input_ids=group.ids,
            attention_mask=group.mask,
            position_ids=group.positions,
            use_cache=True,
            logits_to_keep=0 if echo else 1,
            **{self.cache_arg: group.cache},
        )
        group.cache = getattr(out, self.cache_arg)
        if echo:
            _prompt_logprobs(states, group.ids, out.logits)
        logits = out.logits[:, -1, :]
        temps = torch.tensor([s.row.temperature for s in states])
        top_ps = torch.tensor([s.row.top_p for s in states])
        # Greedy rows never read their draw; their generators are private, so skipping it
        # changes nothing that any row sees.
        draws = torch.tensor([s.uniform() if s.row.temperature > 0 else 0.0 for s in states])
        picked = sample_next(_constrained(states, logits), temps, top_ps, draws)
        _token_logprobs(states, logits, picked)
        tokens = picked.tolist()
        keep: list[int] = []
        for k, (state, token) in enumerate(zip(states, tokens, strict=True)):
            result = _finish(state, int(token), self.eos_ids, self.decode)
            if result is None and state.constraint and not state.constraint.accept(int(token)):
                result = _result(state, self.decode(state.tokens), "stop")  # cannot happen
            if result is None:
                keep.append(k)
                if self.on_token is not None:
                    self.on_token(state.key, int(token))
            else:
                self.on_done(state.key, result)
        if not keep:
            return False
        group.select(keep, tokens)
        return True


def _constrained(states: list[_RowState], logits: torch.Tensor) -> torch.Tensor:
    """`logits` with what each constrained row's grammar forbids at -inf (a copy: the raw
    logits stay for the log-probabilities); `logits` itself when no row is constrained."""
    if all(s.constraint is None for s in states):
        return logits
    masked = logits.clone()
    for k, state in enumerate(states):
        if state.constraint is not None:
            state.constraint.allow(masked[k : k + 1])
    return masked


def _token_logprobs(states: list[_RowState], logits: torch.Tensor, picked: torch.Tensor) -> None:
    """Each asking row's log-probability of the token it picked, from this step's logits."""
    asking = [k for k, s in enumerate(states) if s.row.logprobs is not None]
    if not asking:
        return
    index = torch.tensor(asking)
    top = max(states[k].row.logprobs or 0 for k in asking)
    for k, entry in zip(asking, at_positions(logits[index], picked[index], top), strict=True):
        states[k].logprobs.append(entry)


def _prompt_logprobs(states: list[_RowState], ids: torch.Tensor, logits: torch.Tensor) -> None:
    """Each asking row's prompt tokens after the first, scored by the prefill's logits at the
    position before each (the prompt is the last `len(prompt_ids)` columns: left padding)."""
    width = ids.shape[1]
    for k, state in enumerate(states):
        if state.row.prompt_logprobs is None:
            continue
        start = width - len(state.row.prompt_ids)
        targets = ids[k, start + 1 :]
        scored = at_positions(logits[k, start : width - 1], targets, state.row.prompt_logprobs)
        state.prompt_logprobs = tuple(scored)


def generate_batch(
    model: Any,
    rows: Sequence[Row],
    *,
    eos_ids: frozenset[int],
    pad_id: int,
    decode: Callable[[list[int]], str],
    on_done: Callable[[int, RowResult], None],
) -> None:
    """Decode every row to completion as one static batch, calling `on_done(row_index,
    result)` as each finishes."""

    def done(key: Hashable, result: RowResult) -> None:
        on_done(cast(int, key), result)

    batch = DecodeBatch(model, eos_ids=eos_ids, pad_id=pad_id, decode=decode, on_done=done)
    batch.add(list(enumerate(rows)))
    while len(batch):
        batch.step()
