"""What the engine decodes and returns, and how per-sample seeds are derived (no torch here).

A request becomes rows: one per (prompt, sample index), each with its own settings and seed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Row:
    """One sequence to generate: a prompt and its sampling settings."""

    prompt_ids: tuple[int, ...]
    temperature: float
    top_p: float
    max_tokens: int
    seed: int
    stops: tuple[str, ...] = ()
    logprobs: int | None = None
    """None: no logprobs; k ≥ 0: each generated token's log-probability and the k likeliest
    alternatives at its position (`logprobs.py`)."""
    prompt_logprobs: int | None = None
    """The same for every prompt token but the first (`echo` with `logprobs` on
    `/v1/completions`); None: not computed (the prefill then keeps only its last logits)."""
    constraint: Callable[[], Any] | None = field(default=None, compare=False)
    """Makes the row's grammar matcher (`constrain.py`): `response_format`, a forced call."""


@dataclass(frozen=True)
class TokenLogprob:
    """One position's log-probability under the model's own distribution (softmax of the raw
    logits: before temperature, top-p or any constraint, as vLLM's default `raw_logprobs`)."""

    token: int
    logprob: float
    top: tuple[tuple[int, float], ...] = ()
    """The likeliest tokens there and their log-probabilities, most likely first."""


@dataclass(frozen=True)
class RowResult:
    text: str
    finish_reason: str
    """`stop` (end-of-turn token or stop string) or `length`."""
    completion_tokens: int
    logprobs: tuple[TokenLogprob, ...] | None = None
    """With `Row.logprobs`: one per generated token, a final end-of-turn token included (as
    vLLM reports it: how sure the model was to stop)."""
    prompt_logprobs: tuple[TokenLogprob, ...] | None = None
    """With `Row.prompt_logprobs`: one per prompt token after the first."""


def derive_seed(seed: int, index: int) -> int:
    """A 63-bit seed for sample `index` of a request seeded with `seed` (stable across runs)."""
    digest = hashlib.sha256(f"tuneloop-serve:{seed}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1
