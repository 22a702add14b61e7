"""Test helpers: a fake OpenAI-compatible upstream (FastAPI, no model) and real uvicorn
servers on loopback ports, each in its own thread with its own event loop."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from tuneloop.serve.lifecycle import bind


def fake_upstream(name: str, *, delay_s: float = 0.0, chunk_delay_s: float = 0.0) -> FastAPI:
    """Answers chat and text completions with `<name>: <last user text>`; the model is `name`,
        completion ids are `chatcmpl-<name>-<n>`. `stream: true` gets SSE chunks, one per word. A
    whole chat answer's `x-seen-model` header is the model the request asked for."""
    app = FastAPI()
    counter = itertools.count()

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok", "model": name}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": name, "object": "model"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        body = await request.json()
        if not body.get("messages"):
            error = {"message": "messages: field required", "type": "invalid_request_error"}
            return JSONResponse({"error": error}, status_code=400)
        if delay_s:
            await asyncio.sleep(delay_s)
        cid = f"chatcmpl-{name}-{next(counter)}"
        text = f"{name}: {body['messages'][-1]['content']}"
        if body.get("stream"):
            chunks = _chunks(cid, name, text, chunk_delay_s)
            return StreamingResponse(chunks, media_type="text/event-stream")
        choice = {"index": 0, "message": {"role": "assistant", "content": text}}
        seen = request.headers.get("authorization", "")
        return JSONResponse(
            headers={"x-seen-authorization": seen, "x-seen-model": str(body.get("model"))},
            content={
                "id": cid,
                "object": "chat.completion",
                "created": int(time.time()),
                "model": name,
                "choices": [{**choice, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
            },
        )

    @app.post("/v1/completions")
    async def completions(request: Request) -> dict[str, Any]:
        body = await request.json()
        return {
            "id": f"cmpl-{name}-{next(counter)}",
            "object": "text_completion",
            "model": name,
            "choices": [{"index": 0, "text": f"{name}: {body['prompt']}", "finish_reason": "stop"}],
        }

    return app


async def _chunks(cid: str, model: str, text: str, delay_s: float) -> AsyncIterator[bytes]:
    import json

    def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
        chunk = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(chunk)}\n\n".encode()

    yield event({"role": "assistant", "content": ""})
    for i, word in enumerate(text.split(" ")):
        if delay_s:
            await asyncio.sleep(delay_s)
        yield event({"content": word if i == 0 else " " + word})
    yield event({}, "stop")
    yield b"data: [DONE]\n\n"


@contextmanager
def running(app: Any) -> Iterator[str]:
    """Serve `app` with uvicorn on a free loopback port in a thread; yields its base URL."""
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=5)
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
