"""What the engine decodes and returns, and how per-sample seeds are derived (no torch here).

A request becomes rows: one per (prompt, sample index), each with its own settings and seed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Row:
    """One sequence to generate: a prompt and its sampling settings."""

    prompt_ids: tuple[int, ...]
    temperature: float
    top_p: float
    max_tokens: int
    seed: int
    stops: tuple[str, ...] = ()


@dataclass(frozen=True)
class RowResult:
    text: str
    finish_reason: str
    """`stop` (end-of-turn token or stop string) or `length`."""
    completion_tokens: int


def derive_seed(seed: int, index: int) -> int:
    """A 63-bit seed for sample `index` of a request seeded with `seed` (stable across runs)."""
    digest = hashlib.sha256(f"tuneloop-serve:{seed}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1
