"""A stub cascade tier: an OpenAI-compatible app whose answer and confidence per prompt are
given, with or without logprobs, for router and server tests that need no model."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

Answer = Callable[[str, dict[str, Any]], tuple[str, float]]
"""(prompt text, request) → (answer, the logprob of each of its tokens)."""


def tier_app(name: str, answer: Answer, *, logprobs: bool = True) -> Starlette:
    """A tier whose answer to a chat request is `answer(last user text, request)`; each of its
    two tokens has that logprob and a runner-up 1.0 below. `logprobs=False`: it never returns
    them. `seen` (on the app's state) lists every request body it got."""
    counter = itertools.count()
    seen: list[dict[str, Any]] = []

    async def chat(request: Request) -> JSONResponse:
        body = await request.json()
        seen.append(body)
        text, lp = answer(body["messages"][-1]["content"], body)
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": "stop",
        }
        if logprobs and body.get("logprobs"):
            entry = {
                "token": "t",
                "logprob": lp,
                "top_logprobs": [
                    {"token": "t", "logprob": lp},
                    {"token": "u", "logprob": lp - 1.0},
                ],
            }
            choice["logprobs"] = {"content": [entry, entry]}
        return JSONResponse(
            {
                "id": f"chatcmpl-{name}-{next(counter)}",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model"),
                "choices": [choice],
                "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
            }
        )

    async def models(request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": name}]})

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    app = Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/models", models),
            Route("/health", health),
        ]
    )
    app.state.seen = seen
    return app


def descriptor(
    urls: dict[str, str], *, threshold: float = -0.5, prices: tuple[float, float] = (1.0, 10.0)
) -> dict[str, Any]:
    """A two-tier cascade over stub tiers at `urls` (`small`, `big`), handing off on
    mean_logprob below `threshold`."""
    small, big = urls["small"], urls["big"]
    return {
        "kind": "cascade",
        "name": "stub-cascade",
        "components": [
            {
                "name": "small",
                "endpoint": small,
                "model": "small-1",
                "usd_per_1m": prices[0],
                "signal": "mean_logprob",
                "threshold": threshold,
            },
            {"name": "big", "endpoint": big, "model": "big-1", "usd_per_1m": prices[1]},
        ],
    }
