"""Streamed completions: the engine's per-token progress as OpenAI server-sent events.

`stream_response(engine, rows, meta)` submits the rows with a listener that forwards each
token (from the engine's worker thread) to an asyncio queue, and returns a `StreamingResponse`
of `chat.completion.chunk` / `text_completion` events ending with `data: [DONE]`. With
`stream_options.include_usage` every chunk carries `"usage": null` and one last chunk with no
choices carries the totals, as OpenAI sends them.

What is held back, and why: text is decoded from all of a row's tokens at each wakeup, and the
tail that could still turn out to be the start of a stop string (or of a `<tool_call>` when
tools are in use), or an incomplete UTF-8 character, is not sent until it is settled — so the
concatenated deltas equal the non-streamed completion. Tool calls are sent whole, in one delta
per call, when the row finishes and its text parses (`tools.parse_tool_calls`); otherwise the
held text is sent as content.

A client that disconnects cancels the request's future (in a `finally` around the response),
and the engine drops its rows at the next step: the slot is free for a waiting request.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from tuneloop.serve.embedded.protocol import usage
from tuneloop.serve.embedded.row import Row, RowResult
from tuneloop.serve.embedded.tools import parse_tool_calls, visible_prefix

if TYPE_CHECKING:
    from tuneloop.serve.embedded.engine import Engine


@dataclass(frozen=True)
class StreamMeta:
    """What every chunk of one response shares, and how its text is read."""

    kind: str
    """`chat` or `text`."""
    id: str
    model: str
    prompt_tokens: int
    include_usage: bool
    tools: bool
    """Whether the completion is read for tool calls."""
    prefill: str = ""
    """The forced start of a chat reply (`tool_choice` required or named): read, and sent if
    it ends as content, as the completion's first characters."""
    logprobs: Callable[[RowResult], dict[str, Any] | None] | None = None
    """A finished row's `logprobs` (None when not asked for): sent whole with the choice's
    finishing chunk, which clients append to what they have (the deltas before carry none)."""


class _Listener:
    """Forwards the engine's callbacks (worker thread) into an asyncio queue."""

    def __init__(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[Any]) -> None:
        self.loop, self.queue = loop, queue

    def put(self, item: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is gone (server shutting down)
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)

    def token(self, index: int, token: int) -> None:
        self.put((index, token))

    def done(self, index: int, result: RowResult) -> None:
        self.put((index, result))


class _Choice:
    """One choice's streamed text: tokens so far and the part already sent."""

    def __init__(self, hold: int, tools: bool, prefill: str = "") -> None:
        self.hold, self.tools, self.prefill = hold, tools, prefill
        self.tokens: list[int] = []
        self.sent = ""

    def _settled(self, text: str) -> str:
        text = text.rstrip("\ufffd")  # an incomplete UTF-8 character
        if self.hold:
            text = text[: max(0, len(text) - self.hold)]
        return visible_prefix(text) if self.tools else text

    def advance(self, decode: Callable[[list[int]], str]) -> str:
        """The newly settled text since the last call."""
        safe = self._settled(self.prefill + decode(self.tokens))
        if len(safe) <= len(self.sent) or not safe.startswith(self.sent):
            return ""
        new, self.sent = safe[len(self.sent) :], safe
        return new

    def finish(self, result: RowResult) -> tuple[str, list[dict[str, Any]], str]:
        """(remaining content, tool calls, finish reason) for the finished row."""
        text = self.prefill + result.text
        parsed = parse_tool_calls(text) if self.tools else None
        content, calls, reason = text, [], result.finish_reason
        if parsed is not None:
            content = parsed[0] or ""
            calls = [call.openai() for call in parsed[1]]
            reason = "tool_calls"
        rest = content[len(self.sent) :] if content.startswith(self.sent) else ""
        return rest, calls, reason


class _Chunks:
    """Serialises chunks in the shape of the route (chat or text)."""

    def __init__(self, meta: StreamMeta) -> None:
        self.meta = meta
        self.created = int(time.time())
        self.object = "chat.completion.chunk" if meta.kind == "chat" else "text_completion"

    def event(self, choices: list[dict[str, Any]], **extra: Any) -> bytes:
        body: dict[str, Any] = {
            "id": self.meta.id,
            "object": self.object,
            "created": self.created,
            "model": self.meta.model,
            "choices": choices,
        }
        if self.meta.include_usage:
            body["usage"] = None
        body.update(extra)
        return b"data: " + json.dumps(body, ensure_ascii=False).encode() + b"\n\n"

    def choice(
        self,
        index: int,
        text: str = "",
        reason: str | None = None,
        logprobs: dict[str, Any] | None = None,
        **delta: Any,
    ) -> dict[str, Any]:
        if self.meta.kind == "text":
            return {"index": index, "text": text, "logprobs": logprobs, "finish_reason": reason}
        if text:
            delta["content"] = text
        return {"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": reason}


async def _events(
    engine: Engine, meta: StreamMeta, choices: list[_Choice], queue: asyncio.Queue[Any]
) -> AsyncIterator[bytes]:
    chunks, n = _Chunks(meta), len(choices)
    if meta.kind == "chat":
        yield chunks.event([chunks.choice(i, role="assistant", content="") for i in range(n)])
    left, completion_tokens = len(choices), 0
    while left:
        items = [await queue.get()]
        while not queue.empty():
            items.append(queue.get_nowait())
        moved: set[int] = set()
        out: list[dict[str, Any]] = []
        for item in items:
            if isinstance(item, Future):  # the request ended without finishing every row
                err = item.exception() if not item.cancelled() else None
                message = f"generation failed: {err!r}" if err else "generation cancelled"
                yield chunks.event([], error={"message": message, "type": "server_error"})
                return
            index, payload = item
            if isinstance(payload, int):
                choices[index].tokens.append(payload)
                moved.add(index)
                continue
            moved.discard(index)
            rest, calls, reason = choices[index].finish(payload)
            if rest:
                out.append(chunks.choice(index, rest))
            for k, call in enumerate(calls):
                out.append(chunks.choice(index, tool_calls=[{"index": k, **call}]))
            scored = meta.logprobs(payload) if meta.logprobs is not None else None
            out.append(chunks.choice(index, reason=reason, logprobs=scored))
            completion_tokens += payload.completion_tokens
            left -= 1
        ahead = [(i, choices[i].advance(engine.decode)) for i in sorted(moved)]
        for choice in [chunks.choice(i, text) for i, text in ahead if text] + out:
            yield chunks.event([choice])
    if meta.include_usage:
        yield chunks.event([], usage=usage(meta.prompt_tokens, completion_tokens))
    yield b"data: [DONE]\n\n"


class _CancellingStream(StreamingResponse):
    """A streaming response that cancels its request's future however it ends."""

    def __init__(self, content: AsyncIterator[bytes], future: Future[list[RowResult]]) -> None:
        super().__init__(content, media_type="text/event-stream")
        self.future = future

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.future.cancel()  # a no-op once every row finished


def reshaped(stream: StreamingResponse, content: AsyncIterator[bytes]) -> StreamingResponse:
    """`content` (made from `stream`'s events) sent instead of them, still cancelling the
    request when the response ends however it ends (the Responses API's events)."""
    assert isinstance(stream, _CancellingStream)
    out = _CancellingStream(content, stream.future)
    out.headers.update({k: v for k, v in stream.headers.items() if k.startswith("x-")})
    return out


def stream_response(
    engine: Engine, rows: list[Row], meta: StreamMeta, stops: tuple[str, ...]
) -> StreamingResponse:
    """Submit `rows` and stream their progress as server-sent events."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[Any] = asyncio.Queue()
    listener = _Listener(loop, queue)
    future = engine.submit(rows, listener)

    def ended(f: Future[list[RowResult]]) -> None:
        if f.cancelled() or f.exception() is not None:
            listener.put(f)

    future.add_done_callback(ended)
    hold = max((len(s) for s in stops), default=1) - 1
    choices = [_Choice(hold, meta.tools, meta.prefill) for _ in rows]
    return _CancellingStream(_events(engine, meta, choices, queue), future)
