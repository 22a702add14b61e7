"""The cascade server's HTTP surface and process: one OpenAI-compatible endpoint in front of a
cascade's tiers (`router.py` says what a request does).

    python -m tuneloop.serve.cascade.app PLAN.json --host 127.0.0.1 --port 0 --port-file F

Routes: `POST /v1/chat/completions`, `POST /v1/completions` (the router), `GET /v1/models`
(the cascade's name), `GET /health`. A `stream: true` request is answered when the cascade
has answered — the hand-off needs the whole first answer — as a stream of two chunks (the
text, then the finish reason with the trace and, when asked, the usage) and `[DONE]`: a
streaming client works, it just sees no token before the end. The response header
`x-tuneloop-tier` names the tier that answered.

The plan (`backend.py` writes it) is the descriptor and where each tier is served:
`{"descriptor", "base", "endpoints": {NAME: {"base_url", "model", "api_key_env"}},
"api_key_env"}` — keys by the name of their variable, never by value. Before it serves, the
process asks every tier that hands off on log-probabilities for one answer with them, and
exits with one line naming the tier and the server option if they do not come back.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any

import typer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tuneloop.cascade_spec import CascadeSpec, read_cascade
from tuneloop.entry import run_app
from tuneloop.errors import InputError
from tuneloop.records import atomic_write_text
from tuneloop.serve.api_error import ApiError
from tuneloop.serve.cascade.router import Router, TierEndpoint
from tuneloop.serve.guard import BrowserGuard
from tuneloop.serve.lifecycle import EXIT_BIND, bind
from tuneloop.tiers import CASCADE_FIELD, TIER_HEADER


def create_cascade_app(router: Router, api_key: str | None = None) -> Starlette:
    """The routes over `router`; with `api_key`, `/v1/*` needs `Authorization: Bearer` it."""

    def refused(request: Request) -> Response | None:
        if api_key and request.headers.get("authorization") != f"Bearer {api_key}":
            err = ApiError("missing or wrong API key", status=401, type="authentication_error")
            return JSONResponse(err.body(), status_code=401)
        return None

    async def complete(request: Request, chat: bool) -> Response:
        if (no := refused(request)) is not None:
            return no
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise ValueError
        except ValueError:
            err = ApiError("the request body is not a JSON object")
            return JSONResponse(err.body(), status_code=400)
        status, out = await router.answer(body, chat=chat)
        headers = {}
        if status == 200:
            headers[TIER_HEADER] = out[CASCADE_FIELD]["tier"]
            if body.get("stream"):
                return StreamingResponse(
                    _sse(out, chat, body), media_type="text/event-stream", headers=headers
                )
        return JSONResponse(out, status_code=status, headers=headers)

    async def chat(request: Request) -> Response:
        return await complete(request, chat=True)

    async def completions(request: Request) -> Response:
        return await complete(request, chat=False)

    async def models(request: Request) -> Response:
        if (no := refused(request)) is not None:
            return no
        entry = {"id": router.spec.name, "object": "model", "owned_by": "tuneloop-cascade"}
        return JSONResponse({"object": "list", "data": [entry]})

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "tiers": [t.name for t in router.spec.tiers]})

    routes = [
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await router.aclose()

    return Starlette(routes=routes, lifespan=lifespan)


async def _sse(out: dict[str, Any], chat: bool, request: dict[str, Any]) -> Any:
    """The answer as OpenAI stream chunks: the text, then the finish with the trace."""
    choice = (out.get("choices") or [{}])[0]
    common = {"id": out.get("id", "cascade"), "created": out.get("created", int(time.time()))}
    common |= {"model": out["model"]}
    kind = "chat.completion.chunk" if chat else "text_completion"
    if chat:
        message = choice.get("message") or {}
        first = {"index": 0, "delta": {"role": "assistant", "content": message.get("content")}}
        last: dict[str, Any] = {"index": 0, "delta": {}}
    else:
        first = {"index": 0, "text": choice.get("text", "")}
        last = {"index": 0, "text": ""}
    first["finish_reason"] = None
    last["finish_reason"] = choice.get("finish_reason")
    if "logprobs" in choice:
        first["logprobs"] = choice["logprobs"]
    chunks = [
        {**common, "object": kind, "choices": [first]},
        {**common, "object": kind, "choices": [last], CASCADE_FIELD: out[CASCADE_FIELD]},
    ]
    options = request.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage") and "usage" in out:
        chunks.append({**common, "object": kind, "choices": [], "usage": out["usage"]})
    for chunk in chunks:
        yield f"data: {json.dumps(chunk)}\n\n"
    yield "data: [DONE]\n\n"


def read_plan(path: Path) -> tuple[CascadeSpec, dict[str, TierEndpoint], str | None]:
    """The spec, the tiers' endpoints (keys read from their variables) and the front key."""
    plan = json.loads(Path(path).read_text())
    spec = read_cascade(plan["descriptor"], str(path), base=Path(plan["base"]))
    endpoints = {}
    for name, where in plan["endpoints"].items():
        key_env = where.get("api_key_env")
        key = os.environ.get(key_env) if key_env else None
        if key_env and not key:
            raise InputError(f"tier {name!r}: api_key_env {key_env!r} is not set")
        endpoints[name] = TierEndpoint(where["base_url"], where["model"], key)
    front_env = plan.get("api_key_env")
    return spec, endpoints, os.environ.get(front_env) if front_env else None


def run_cascade(
    plan: Path, host: str, port: int, port_file: Path | None, parent_pid: int | None
) -> int:
    """Check the tiers, bind, serve until SIGTERM/SIGINT; the process exit status."""
    from tuneloop.serve.embedded.server import die_with_parent

    if parent_pid is not None:
        die_with_parent(parent_pid)
    spec, endpoints, api_key = read_plan(plan)
    router = Router(spec, endpoints)
    problem = asyncio.run(router.check())
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr, flush=True)
        return 2
    router = Router(spec, endpoints)  # a fresh client for uvicorn's own event loop
    try:
        sock = bind(host, port)
    except OSError as err:
        print(f"error: cannot bind {host}:{port}: {err.strerror or err}", file=sys.stderr)
        return EXIT_BIND
    if port_file is not None:
        atomic_write_text(port_file, f"{sock.getsockname()[1]}\n")
    import uvicorn

    app = BrowserGuard(create_cascade_app(router, api_key), host)
    print(f"serving cascade {spec.name!r} ({', '.join(t.name for t in spec.tiers)})", flush=True)
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=5)
    uvicorn.Server(config).run(sockets=[sock])
    return 0


def serve_plan(
    plan: Annotated[Path, typer.Argument(help="The serving plan backend.py writes.")],
    host: Annotated[str, typer.Option()] = "127.0.0.1",
    port: Annotated[int, typer.Option()] = 0,
    port_file: Annotated[Path | None, typer.Option()] = None,
    parent_pid: Annotated[int | None, typer.Option()] = None,
) -> None:
    """Serve a cascade from its plan (what `tuneloop serve CASCADE.json` and the loop spawn)."""
    raise typer.Exit(run_cascade(plan, host, port, port_file, parent_pid))


def main() -> None:
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(serve_plan)
    run_app(app)


if __name__ == "__main__":
    main()
