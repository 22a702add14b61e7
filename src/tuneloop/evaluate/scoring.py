"""Scoring one sample: the item's scorer, then each of `eval.metrics`.

Which scorer an item gets is `scorers/resolve.py`'s, as in training. An agent sample's trace
goes through `scorers.agent.score_sample` (the trace to a trajectory scorer, the final answer
to any other, 0 for an unfinished trajectory); a single-turn sample's text goes to every
scorer (an agent scorer reads it as a one-turn answer). Scorers registered `inline` run on the
event loop; the others in a worker thread, with their detail made JSON.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from tuneloop.plugins import Score
from tuneloop.samplelog import AgentTrace
from tuneloop.scorers.agent import score_sample
from tuneloop.scorers.resolve import ResolvedScorer, ScorerResolver


def _call(
    scorer: ResolvedScorer, item: dict[str, Any], text: str, trace: AgentTrace | None
) -> Score:
    return score_sample(scorer, item, trace) if trace is not None else scorer.fn(item, text)


async def score_one(
    scorer: ResolvedScorer, item: dict[str, Any], text: str, trace: AgentTrace | None
) -> Score:
    """One scorer on one sample (see the module docstring)."""
    if scorer.inline:  # registered as fast, with plain-JSON details
        return _call(scorer, item, text, trace)
    result = await asyncio.to_thread(_call, scorer, item, text, trace)
    return Score(result.value, json.loads(json.dumps(result.detail, default=str)))


async def score_all(
    resolver: ScorerResolver,
    metrics: Sequence[str],
    item: dict[str, Any],
    text: str,
    trace: AgentTrace | None,
) -> tuple[Score, dict[str, float]]:
    """(the item's own score, the further metrics by name); a scorer's exception propagates."""
    own = resolver.resolve(item)
    if own.inline:  # called here rather than through score_one: one coroutine less a sample
        result = _call(own, item, text, trace)
    else:
        result = await score_one(own, item, text, trace)
    values = {}
    for name in metrics:
        if name != own.name:  # the row's own score already is that output
            values[name] = (await score_one(resolver.named(name), item, text, trace)).value
    return result, values
