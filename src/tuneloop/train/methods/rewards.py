"""GRPO rewards are the registered eval scorers: one source of truth for "correct".

`scorer_reward` turns scorers into a TRL reward function. TRL calls it with the batch's
completions and, as keyword lists, every other dataset column; our GRPO dataset carries the
original row as JSON in `item`, so the scorer sees exactly the reference fields the eval
would see. The scorer is chosen per row by `scorers/resolve.py`, the evaluate phase's resolver:
a fixed `reward_scorer` if given, else the row's own `scorer`, else the default. Unlike the
eval, the row's `scorer_args` are also passed to the scorer's factory (as they always were).
A scorer registered `trajectory=True` (the agent scorers) gets a conversational completion as
its list of messages — tool calls included — instead of the flattened text.

It also counts, per generation, the prompts of each difficulty band (the corpus's `band`
field, `data/corpus/bands.py`) and logs them through TRL's `log_metric` as `band_<name>`, so
each metrics.jsonl row says which bands the step's groups were drawn from. A prompt is counted
once, not once per completion: TRL's sampler lays out a prompt's G completions side by side,
so a group is a run of equal rows. TRL averages a logged value over the processes; each one
logs its count × the world size, so the row holds the sum (exact when every process holds
whole groups, i.e. nproc divides `train.batch_size`; a group split across two processes counts
in both). Rows without a band are not counted; once a band is seen, every known band is logged
each step (0 when absent), so that with a corpus whose rows all carry a band (as `tuneloop
corpus build` writes them) every process logs the same names.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from tuneloop.scorers.resolve import ScorerResolver


def completion_text(completion: Any) -> str:
    """The text of a TRL completion: a string, or a list of messages (conversational)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        return "".join(str(m.get("content") or "") for m in completion if isinstance(m, dict))
    return str(completion)


BANDS = ("hard", "medium", "easy", "unknown")
"""The corpus builder's bands (`data/corpus/bands.BANDS`; a phase does not import another,
tests/train/methods/test_rewards.py keeps the two equal)."""


def band_counts(items: Sequence[str], rows: Sequence[dict[str, Any]]) -> Counter[str]:
    """Pure: prompts per band in one reward call (`items`: the raw `item` column, `rows` the
    same parsed); a run of equal items is one prompt's group."""
    counts: Counter[str] = Counter()
    for i, (raw, row) in enumerate(zip(items, rows, strict=True)):
        band = row.get("band")
        if isinstance(band, str) and (i == 0 or items[i - 1] != raw):
            counts[band] += 1
    return counts


def scorer_reward(
    fixed: str | None, default: str, *, get: Callable[[str], Any] | None = None
) -> Callable[..., list[float | None]]:
    """A TRL reward function: reward_i = scorer(item_i, completion_i).value."""
    resolver = ScorerResolver(default, override=fixed, get=get)
    seen: set[str] = set()

    def reward(
        completions: list[Any],
        item: list[str],
        log_metric: Callable[[str, float], None] | None = None,
        **_: Any,
    ) -> list[float | None]:
        out: list[float | None] = []
        rows = [json.loads(raw) for raw in item]
        for completion, row in zip(completions, rows, strict=True):
            resolved = resolver.for_row(row)
            whole = resolved.trajectory and isinstance(completion, list)
            answer = completion if whole else completion_text(completion)
            out.append(float(resolved.fn(row, answer).value))
        counts = band_counts(item, rows)
        seen.update(counts)
        if log_metric is not None and seen:
            world = int(os.environ.get("WORLD_SIZE", "1"))
            for band in sorted(seen.union(BANDS)):
                log_metric(f"band_{band}", float(counts[band] * world))
        return out

    reward.__name__ = f"scorer_{fixed or default}"
    return reward
