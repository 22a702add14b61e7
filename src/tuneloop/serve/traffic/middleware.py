"""Traffic + feedback logging for any FastAPI app: `install_traffic(app, TrafficLog(DIR))`.

What it adds (the file side — scrubbing, fsync, rotation, the id index — is `log.py`):

- an ASGI middleware that logs every successful `POST /v1/chat/completions` and
  `/v1/completions` exchange (request body + response object, or the chunk list of a streamed
  `text/event-stream` response) to the log, and every `POST /v1/responses` as the chat
  exchange it amounts to (request translated, the whole Response — a stream's last event —
  as a `chat.completion`, its id the response's: `serve/responses.py`) — a cascade's trace
  (`tuneloop_cascade`, on the body or on a streamed chunk) recorded beside it, validated, or a
  note when it is malformed (`exchange.py`; never an error of the request) — and merges
  `"traffic": log.health()` into the JSON body of `GET /health`, so a full disk shows up
  where monitoring looks;
- `POST /v1/feedback` with `{"completion_id", "verdict": "up"|"down", "score": 0..1,
  "correction": "the right answer"}` (at least one of the last three): 200 once the feedback
  line is fsynced; 400 for a bad body; 404 (OpenAI-style error body) for a completion id the log
  does not know, recorded in `DIR/rejects/feedback.jsonl` and the server log; 503 when the log
  has stopped.

Used by the proxy (`serve/proxy/`) and, with one line, the embedded server. Deliberate choices:
the middleware is pure ASGI (no `BaseHTTPMiddleware`, which buffers streams and costs a task
per request) and passes every byte through unchanged; what it keeps for the log is capped at
`max_record_bytes` per side (larger exchanges are counted as skipped, not logged); error
responses are not logged (they are not training data). The completion id is registered as
soon as the response carries it — before the body's last byte reaches the client — so a
client that sends feedback right after a response is never refused. Verdicts are only
`up`/`down` here, not every synonym the ingester understands: an API should refuse what it
does not define.
"""

from __future__ import annotations

import asyncio
import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from tuneloop.serve.api_error import ApiError
from tuneloop.serve.traffic.files import completion_id
from tuneloop.serve.traffic.log import TrafficLog, TrafficLogError
from tuneloop.tiers import CASCADE_FIELD

__all__ = ["FeedbackBody", "TrafficMiddleware", "install_traffic"]

RESPONSES = "/v1/responses"
"""Logged as the chat exchange it amounts to (`serve/responses.py`)."""
LOGGED_PATHS = frozenset({"/v1/chat/completions", "/v1/completions", RESPONSES})
FEEDBACK_MAX_BYTES = 256 << 10

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class FeedbackBody(BaseModel):
    """`POST /v1/feedback`."""

    model_config = ConfigDict(extra="forbid")

    completion_id: str = Field(min_length=1, max_length=512)
    """The `id` of the completion judged (`<id>#<index>` for one choice of several)."""
    verdict: Literal["up", "down"] | None = None
    """Thumbs up or down."""
    score: float | None = Field(default=None, ge=0.0, le=1.0)
    """A graded judgement in [0, 1]."""
    correction: str | None = Field(default=None, min_length=1)
    """The right answer, when the user gave one."""

    @model_validator(mode="after")
    def _says_something(self) -> FeedbackBody:
        if self.verdict is None and self.score is None and self.correction is None:
            raise ValueError("give at least one of verdict, score, correction")
        return self


class _Capture:
    """Bytes of one side of an exchange, up to a cap (past it only the size is kept)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.parts: list[bytes] = []
        self.size = 0

    def add(self, data: bytes) -> None:
        self.size += len(data)
        if self.size <= self.cap and data:
            self.parts.append(data)

    @property
    def overflow(self) -> bool:
        return self.size > self.cap

    def data(self) -> bytes:
        return b"".join(self.parts)


class TrafficMiddleware:
    """Logs completion exchanges, reports the log on /health, closes it at shutdown."""

    def __init__(self, app: ASGIApp, log: TrafficLog) -> None:
        self.app = app
        self.log = log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, self._closing(send))
        elif scope["type"] != "http":
            await self.app(scope, receive, send)
        elif scope["method"] == "POST" and scope["path"] in LOGGED_PATHS:
            await self._exchange(scope, receive, send)
        elif scope["method"] == "GET" and scope["path"] == "/health":
            await self._health(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    def _closing(self, send: Send) -> Send:
        async def wrapped(message: Message) -> None:
            if message["type"].startswith("lifespan.shutdown."):
                await asyncio.to_thread(self.log.close)
            await send(message)

        return wrapped

    async def _exchange(self, scope: Scope, receive: Receive, send: Send) -> None:
        cap = self.log.max_record_bytes
        request, response = _Capture(cap), _Capture(cap)
        state: dict[str, Any] = {"status": 0, "sse": False, "length": None, "done": False}
        state["id_seen"] = False  # a stream's id is registered from its first event

        async def receiving() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                request.add(message.get("body", b""))
            return message

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                state["status"] = message["status"]
                headers = _headers(message)
                state["sse"] = headers.get("content-type", "").startswith("text/event-stream")
                length = headers.get("content-length", "")
                state["length"] = int(length) if length.isdigit() else None
            elif message["type"] == "http.response.body" and state["status"] == 200:
                response.add(message.get("body", b""))
                last = not message.get("more_body", False) or response.size == state["length"]
                if state["sse"] and not state["id_seen"]:
                    state["id_seen"] = self._remember_streamed(response)
                if last and not state["done"]:
                    state["done"] = True
                    self._record(request, response, state["sse"], scope["path"] == RESPONSES)
            await send(message)

        await self.app(scope, receiving, sending)

    def _remember_streamed(self, response: _Capture) -> bool:
        """Register a stream's id from its first event, long before the stream ends; whether
        the first event has been seen (then there is nothing more to look for)."""
        try:
            chunks = parse_sse(response.data(), complete_only=True)
        except ValueError:
            return True  # not JSON events: nothing to register, and _record will skip it
        first = chunks[0] if chunks else None
        if isinstance(first, dict) and isinstance(first.get("response"), dict):
            chunks = [first["response"]]  # a Responses stream: its id is its response's
        cid = completion_id(chunks)
        if cid is not None:
            self.log.remember(cid)
        return bool(chunks) or response.overflow

    def _record(self, request: _Capture, response: _Capture, sse: bool, responses: bool) -> None:
        if request.overflow or response.overflow:
            self.log.skip("too_large")
            return
        try:
            body = json.loads(request.data())
            answer = parse_sse(response.data()) if sse else json.loads(response.data())
            if responses:
                body, answer = _as_chat(body, answer)
        except (ValueError, ApiError):
            self.log.skip("unparseable")
            return
        if not isinstance(body, dict) or not isinstance(answer, (dict, list)) or not answer:
            self.log.skip("unparseable")
            return
        self.log.record_exchange(body, answer)

    async def _health(self, scope: Scope, receive: Receive, send: Send) -> None:
        held: list[Message] = []

        async def sending(message: Message) -> None:
            held.append(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                for out in _with_traffic(held, self.log.health()):
                    await send(out)

        await self.app(scope, receive, sending)


def _as_chat(body: Any, answer: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """A Responses exchange (its request, and its Response or a stream's events) as the chat
    exchange it amounts to; ValueError when it is not one."""
    from tuneloop.serve.responses import as_chat_completion, chat_request, completed

    if not isinstance(body, dict):
        raise ValueError("not a request object")
    response = completed(answer) if isinstance(answer, list) else answer
    if not isinstance(response, dict):
        raise ValueError("no completed response")
    chat = chat_request(body)
    chat.pop("stream", None)
    chat.pop("stream_options", None)
    completion = as_chat_completion(response)
    if response.get(CASCADE_FIELD) is not None:  # a cascade's trace stays with its exchange
        completion[CASCADE_FIELD] = response[CASCADE_FIELD]
    return chat, completion


def _headers(message: Message) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in message["headers"]}


def _with_traffic(held: list[Message], health: dict[str, Any]) -> list[Message]:
    """The held /health response with `"traffic": health` merged into its JSON object."""
    start, bodies = held[0], held[1:]
    raw = b"".join(m.get("body", b"") for m in bodies)
    try:
        doc = json.loads(raw)
    except ValueError:
        return held
    if start.get("type") != "http.response.start" or not isinstance(doc, dict):
        return held
    doc["traffic"] = health
    body = json.dumps(doc).encode()
    headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
    headers.append((b"content-length", str(len(body)).encode()))
    return [{**start, "headers": headers}, {"type": "http.response.body", "body": body}]


def parse_sse(data: bytes, *, complete_only: bool = False) -> list[Any]:
    """The JSON payloads of a `text/event-stream` body's `data:` lines (`[DONE]` left out).

    `complete_only` ignores a last line that is not yet terminated (a stream in progress).
    """
    lines = data.decode("utf-8", errors="replace").splitlines(keepends=True)
    if complete_only and lines and not lines[-1].endswith(("\n", "\r")):
        lines.pop()
    out = []
    for line in lines:
        if line.startswith("data:"):
            payload = line[5:].strip()
            if payload and payload != "[DONE]":
                out.append(json.loads(payload))
    return out


def _api_error(err: ApiError) -> JSONResponse:
    return JSONResponse(err.body(), status_code=err.status)


def _check_auth(request: Request, api_key: str | None) -> None:
    if api_key is None:
        return
    given = request.headers.get("authorization", "")
    if not hmac.compare_digest(given.encode(), f"Bearer {api_key}".encode()):
        raise ApiError(
            "missing or wrong API key (Authorization: Bearer …)", status=401, code="invalid_api_key"
        )


async def _feedback_body(request: Request) -> FeedbackBody:
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > FEEDBACK_MAX_BYTES:
            raise ApiError(
                f"feedback body exceeds {FEEDBACK_MAX_BYTES} bytes",
                status=413,
                code="request_too_large",
            )
    try:
        return FeedbackBody.model_validate_json(raw)
    except ValidationError as err:
        first = err.errors()[0]
        param = ".".join(str(p) for p in first["loc"]) or None
        message = f"{param}: {first['msg']}" if param else first["msg"]
        raise ApiError(message, param=param, code="invalid_value") from None


def feedback_handler(
    log: TrafficLog, api_key: str | None = None
) -> Callable[[Request], Awaitable[JSONResponse]]:
    """The `POST /v1/feedback` handler over `log` (see module docstring)."""

    async def feedback(request: Request) -> JSONResponse:
        try:
            _check_auth(request, api_key)
            body = await _feedback_body(request)
        except ApiError as err:
            return _api_error(err)
        cid = body.completion_id
        if log.error is not None:
            return _api_error(
                ApiError(log.error, status=503, type="server_error", code="traffic_log_stopped")
            )
        if not log.knows(cid):
            log.reject(f"unknown completion id {cid!r}", body.model_dump(exclude_none=True))
            return _api_error(
                ApiError(
                    f"unknown completion id {cid!r}: not among the completions this server "
                    f"logged (the last {log.index_size} and those on disk at startup)",
                    status=404,
                    type="not_found_error",
                    param="completion_id",
                    code="completion_not_found",
                )
            )
        fields = body.model_dump(exclude_none=True, exclude={"completion_id"})
        try:
            await asyncio.wrap_future(log.record_feedback(cid, fields))
        except TrafficLogError as err:
            return _api_error(
                ApiError(str(err), status=503, type="server_error", code="traffic_log_stopped")
            )
        return JSONResponse({"object": "feedback", "completion_id": cid, "recorded": True})

    return feedback


def install_traffic(app: FastAPI, log: TrafficLog, *, api_key: str | None = None) -> None:
    """Log `app`'s completions to `log` and serve `POST /v1/feedback` (needing `api_key`
    as a Bearer token when given). Call before the app starts; the log closes at shutdown."""
    app.add_middleware(TrafficMiddleware, log=log)
    app.add_api_route(
        "/v1/feedback", feedback_handler(log, api_key), methods=["POST"], include_in_schema=False
    )
    # first, so that a catch-all route (the proxy's /v1/{path}) cannot shadow it
    app.router.routes.insert(0, app.router.routes.pop())
    app.state.traffic = log
