"""GRPO rewards are the registered eval scorers: one source of truth for "correct".

`scorer_reward` turns scorers into a TRL reward function. TRL calls it with the batch's
completions and, as keyword lists, every other dataset column; our GRPO dataset carries the
original row as JSON in `item`, so the scorer sees exactly the reference fields the eval
would see. The scorer is chosen per row by `scorers/resolve.py`, the evaluate phase's resolver:
a fixed `reward_scorer` if given, else the row's own `scorer`, else the default. Unlike the
eval, the row's `scorer_args` are also passed to the scorer's factory (as they always were).
A scorer registered `trajectory=True` (the agent scorers) gets a conversational completion as
its list of messages — tool calls included — instead of the flattened text.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tuneloop.scorers.resolve import ScorerResolver


def completion_text(completion: Any) -> str:
    """The text of a TRL completion: a string, or a list of messages (conversational)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        return "".join(str(m.get("content") or "") for m in completion if isinstance(m, dict))
    return str(completion)


def scorer_reward(
    fixed: str | None, default: str, *, get: Callable[[str], Any] | None = None
) -> Callable[..., list[float | None]]:
    """A TRL reward function: reward_i = scorer(item_i, completion_i).value."""
    resolver = ScorerResolver(default, override=fixed, get=get)

    def reward(completions: list[Any], item: list[str], **_: Any) -> list[float | None]:
        out: list[float | None] = []
        for completion, raw in zip(completions, item, strict=True):
            row = json.loads(raw)
            resolved = resolver.resolve(row, row.get("scorer_args") or {})
            whole = resolved.trajectory and isinstance(completion, list)
            answer = completion if whole else completion_text(completion)
            out.append(float(resolved.fn(row, answer).value))
        return out

    reward.__name__ = f"scorer_{fixed or default}"
    return reward
