"""The champion's pass rate on each GRPO prompt, sampled from its endpoint (`bands.champion`).

Each prompt is asked `samples` times (one request per sample, seeded by the sample index, as
the evaluate phase does) through the shared OpenAI-compatible client, and every completion is
scored against the row's reference by the row's scorer (`scorers.resolve`, the one resolver of
evaluate and train). A pass rate is the mean score; a request still failing after the
client's retries counts as 0, as a missing sample does everywhere in tuneloop. A refused
endpoint (wrong URL, key or model) stops the build naming `bands.champion`.

`pass_rates` is the pure core over any `sample(messages, seed) -> text | None`; the HTTP
shell `champion_pass_rates` only supplies that function. With `bands.champion.serve: base` the
loop's data phase serves the round's base and passes its `Endpoint`; outside a
loop that setting is refused, naming the key.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from tuneloop.data.corpus.config import ChampionSpec
from tuneloop.data.text import normalized_prompt
from tuneloop.endpoint import Endpoint
from tuneloop.errors import InputError

Sample = Callable[[list[dict[str, Any]], int], Awaitable[str | None]]


async def pass_rates(
    prompts: Sequence[dict[str, Any]], samples: int, sample: Sample, default_scorer: str
) -> dict[str, float]:
    """normalized prompt → mean score of `samples` completions, for GRPO prompt rows."""
    from tuneloop.scorers.resolve import ScorerResolver

    resolver = ScorerResolver(default_scorer)

    async def one(row: dict[str, Any]) -> float:
        texts = await asyncio.gather(*(sample(row["messages"], k) for k in range(samples)))
        fn = resolver.for_row(row).fn
        return sum(float(fn(row, t).value) if t is not None else 0.0 for t in texts) / samples

    rates = await asyncio.gather(*(one(r) for r in prompts))
    return {normalized_prompt(r["messages"]): v for r, v in zip(prompts, rates, strict=True)}


OUTSIDE_LOOP = (
    "bands.champion.serve: base samples the loop's base model, served by the loop's data "
    "phase (tuneloop run); to build this corpus alone, give bands.champion.base_url and model"
)


def champion_pass_rates(
    prompts: Sequence[dict[str, Any]],
    spec: ChampionSpec,
    default_scorer: str = "numeric",
    served: Endpoint | None = None,
) -> dict[str, float]:
    """`pass_rates` against the champion's endpoint (see module docstring)."""
    from tuneloop.client.completions import (
        EndpointRefused,
        MalformedResponse,
        OpenAIClient,
        RequestFailed,
    )

    if spec.serve is not None:
        if served is None:
            raise InputError(OUTSIDE_LOOP)
        base_url, model, api_key = served.base_url, served.model, served.api_key
    else:
        assert spec.base_url is not None and spec.model is not None  # the spec's validator
        base_url, model = spec.base_url, spec.model
        api_key = os.environ.get(spec.api_key_env) if spec.api_key_env else None

    async def run() -> dict[str, float]:
        async with OpenAIClient(base_url, api_key=api_key, concurrency=spec.concurrency) as client:

            async def sample(messages: list[dict[str, Any]], seed: int) -> str | None:
                payload = {
                    "model": model,
                    "messages": messages,
                    "temperature": spec.temperature,
                    "max_tokens": spec.max_tokens,
                    "seed": seed,
                }
                try:
                    return (await client.complete(payload, chat=True)).text
                except (RequestFailed, MalformedResponse):
                    return None

            return await pass_rates(prompts, spec.samples, sample, default_scorer)

    try:
        return asyncio.run(run())
    except EndpointRefused as err:
        raise InputError(f"bands.champion: {base_url} refused the request: {err}") from None
