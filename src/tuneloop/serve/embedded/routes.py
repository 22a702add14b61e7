"""The embedded server's routes: FastAPI handlers over the batching engine.

Routes: `POST /v1/chat/completions`, `POST /v1/completions`, `POST /v1/responses` (the chat
completion it amounts to, `serve/responses.py`), `GET /v1/models` (and `/v1/models/{id}`),
`GET /health`
(which also reports the engine's `running` and `waiting` rows, and how many were `cancelled`
because their client went away).
Chat prompts are rendered with the model's chat template and decoding stops at the template's
end-of-turn token (generation_config's eos ids), or exactly at `--stop-token-ids` when given
(the loop passes one set for both arms, so they cannot stop in different places). Tools are
rendered and tool calls read back as `tools.py` describes; `stream: true` is `stream.py`.
Concurrent requests share a continuously refilled decode batch; see `engine.py` for what
batching does and `decode.py` for what it preserves. The process around them (bind, load,
serve) is `server.py`.

Safety: binds loopback unless told otherwise; with `--api-key-env VAR` every /v1 route needs
`Authorization: Bearer $VAR`; bodies over `max_body_bytes` get a 413 and `max_tokens` over the
cap or the context is clamped to it (the `x-tuneloop-max-tokens` header says so); malformed
JSON and invalid parameters get a 400 with an OpenAI-style error body.
Requests naming another model get a 404, so a client cannot silently evaluate the wrong model.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import random
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from tuneloop.config import ServerConfig
from tuneloop.envs.render import prepare_messages, template_handles_tools
from tuneloop.serve.api_error import ApiError
from tuneloop.serve.embedded.constrain import ANY_OBJECT, ConstraintFactory
from tuneloop.serve.embedded.logprobs import chat_logprobs, completion_logprobs
from tuneloop.serve.embedded.protocol import (
    ChatRequest,
    CompletionRequest,
    decode_body,
    include_usage,
    parse_chat,
    parse_completion,
    read_capped_body,
    usage,
)
from tuneloop.serve.embedded.row import Row, RowResult, derive_seed
from tuneloop.serve.embedded.stream import StreamMeta, reshaped, stream_response
from tuneloop.serve.embedded.tools import forced_call, parse_tool_calls
from tuneloop.serve.responses import ResponseStream, as_response, chat_request, new_id

if TYPE_CHECKING:
    from tuneloop.serve.embedded.engine import Engine


# Seeds for requests that bring none (seeded once from the OS, not per request).
_UNSEEDED = random.Random()


@dataclass(frozen=True)
class ServerSettings:
    """Everything `run_server` needs besides the model folder: the settings a user chooses
    (`ServerConfig`, loop.yaml's `serve:` keys) and what the process is told at launch."""

    config: ServerConfig = ServerConfig()
    """Host, port, batching, caps and threads (`tuneloop serve`'s options)."""
    served_model_name: str | None = None
    """Name clients put in `model`; defaults to the model folder's name (`model` for
    `examples/arith/model`): clients log and display it, and a path there would only name
    this machine's folders."""
    api_key: str | None = None
    """Bearer token required on /v1 routes (read from the env var, never from argv)."""

    def name_for(self, model_dir: str | Path) -> str:
        """The name served for `model_dir`: `served_model_name`, else the folder's name."""
        return self.served_model_name or Path(model_dir).resolve().name

    port_file: str | None = None
    """Where to write the bound port (for port 0), for the parent that spawned us."""
    parent_pid: int | None = None
    """Exit when this process is no longer our parent."""
    stop_token_ids: tuple[int, ...] | None = None
    """Tokens that end a completion, replacing the checkpoint's generation-config eos ids."""
    traffic_log: str | None = None
    """Folder of the traffic log (`serve/traffic/`): every exchange logged, `POST /v1/feedback`
    accepted. Opt-in and never set by the loop's evaluations (their requests are not users')."""


def _error(err: ApiError) -> JSONResponse:
    return JSONResponse(err.body(), status_code=err.status)


def _new_id(kind: str) -> str:
    prefix = "chatcmpl" if kind == "chat" else "cmpl"
    return f"{prefix}-{_UNSEEDED.getrandbits(96):024x}"  # uuid4 costs a syscall


def _chat_choice(
    index: int,
    result: RowResult,
    tools: bool,
    prefill: str = "",
    logprobs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One chat choice; with tools in use, a completion that parses as calls becomes
    `tool_calls` with finish_reason `tool_calls`, anything else stays raw text. `prefill` (a
    forced call's start, see `tools.forced_call`) is read as the completion's beginning."""
    text = prefill + result.text
    parsed = parse_tool_calls(text) if tools else None
    message: dict[str, Any] = {"role": "assistant", "content": text}
    reason = result.finish_reason
    if parsed is not None:
        message = {
            "role": "assistant",
            "content": parsed[0],
            "tool_calls": [call.openai() for call in parsed[1]],
        }
        reason = "tool_calls"
    return {"index": index, "message": message, "finish_reason": reason, "logprobs": logprobs}


MAX_TOKENS_HEADER = "x-tuneloop-max-tokens"
"""Set when a choice was given fewer tokens than the request's `max_tokens` (the server's cap,
or what the context leaves): the most any choice was allowed."""


def _rows(
    prompts: list[list[int]],
    req: ChatRequest | CompletionRequest,
    context: int | None,
    cap: int,
    constraint: ConstraintFactory | None = None,
) -> list[Row]:
    """prompts × n rows; sample index k = prompt index · n + i seeds row k.

    Deliberate deviation from OpenAI and vLLM, which refuse a `max_tokens` above what the
    context leaves: it is clamped to that room and to the server's cap (`max_tokens_cap`),
    so that one eval config works on toy models with tiny contexts and long-generation tasks
    get what fits; `clamped` says so (the `x-tuneloop-max-tokens` header). A prompt that
    fills the context is refused with OpenAI's wording and code, which clients match on.
    """
    base = req.seed if req.seed is not None else _UNSEEDED.getrandbits(63)
    asked = req.max_tokens or cap
    if isinstance(req, ChatRequest):
        logprobs, prompt_logprobs = req.row_logprobs(), None
    else:
        logprobs = req.logprobs
        prompt_logprobs = logprobs if req.echo else None
    rows = []
    for p, ids in enumerate(prompts):
        if not ids:
            raise ApiError("prompt is empty after tokenization", param="prompt")
        room = asked if context is None else context - len(ids)
        if room < 1:
            what = "messages" if isinstance(req, ChatRequest) else "prompt"
            raise ApiError(
                f"This model's maximum context length is {context} tokens. However, your "
                f"{what} resulted in {len(ids)} tokens. Please reduce the length of the {what}.",
                param=what,
                code="context_length_exceeded",
            )
        rows += [
            Row(
                prompt_ids=tuple(ids),
                temperature=req.temperature,
                top_p=req.top_p,
                max_tokens=min(asked, cap, room),
                seed=derive_seed(base, p * req.n + i),
                stops=req.stop_list(),
                logprobs=logprobs,
                prompt_logprobs=prompt_logprobs,
                constraint=constraint,
            )
            for i in range(req.n)
        ]
    return rows


def clamped(rows: list[Row], req: ChatRequest | CompletionRequest) -> dict[str, str]:
    """The `x-tuneloop-max-tokens` header when a row got less than `max_tokens` asked."""
    most = max(r.max_tokens for r in rows)
    asked = req.max_tokens
    return {MAX_TOKENS_HEADER: str(most)} if asked is not None and most < asked else {}


async def _response_events(chat: StreamingResponse, events: ResponseStream) -> AsyncIterator[bytes]:
    """The Responses API's events for a streamed chat completion, as its chunks arrive."""
    for event in events.start():
        yield event
    async for data in chat.body_iterator:
        raw = data if isinstance(data, bytes) else str(data).encode()
        for line in raw.splitlines():
            if line.startswith(b"data: {"):
                for event in events.chunk(json.loads(line[6:])):
                    yield event
    for event in events.finish():
        yield event


class _Routes:
    """Request handlers bound to one engine and one set of settings."""

    def __init__(self, engine: Engine, name: str, settings: ServerSettings) -> None:
        self.engine = engine
        self.name = name
        self.settings = settings
        self.native_tools = template_handles_tools(engine.chat_template)
        """Whether the chat template renders tools itself (else `tools.py`'s fallback)."""

    def check_auth(self, request: Request) -> None:
        key = self.settings.api_key
        if key is None:
            return
        given = request.headers.get("authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {key}".encode()):
            raise ApiError(
                "missing or wrong API key (Authorization: Bearer …)",
                status=401,
                code="invalid_api_key",
            )

    async def body(self, request: Request) -> dict[str, Any]:
        """The request's JSON object body, after its key is checked."""
        self.check_auth(request)
        limits = self.settings.config
        return decode_body(await read_capped_body(request, limits.max_body_bytes), limits)

    def parse(self, body: dict[str, Any], kind: str) -> ChatRequest | CompletionRequest:
        limits = self.settings.config
        req = parse_chat(body, limits) if kind == "chat" else parse_completion(body, limits)
        self.check_model(req.model)
        return req

    def check_model(self, asked: str) -> None:
        if asked != self.name:
            raise ApiError(
                f"model {asked!r} is not served here; this server serves {self.name!r}",
                status=404,
                param="model",
                code="model_not_found",
            )

    async def generate(self, rows: list[Row]) -> list[RowResult]:
        return await asyncio.wrap_future(self.engine.submit(rows))

    def envelope(
        self, kind: str, choices: list[dict[str, Any]], prompt_tokens: int, results: list[RowResult]
    ) -> dict[str, Any]:
        return {
            "id": _new_id(kind),
            "object": "chat.completion" if kind == "chat" else "text_completion",
            "created": int(time.time()),
            "model": self.name,
            "choices": choices,
            "usage": usage(prompt_tokens, sum(r.completion_tokens for r in results)),
        }

    def stream(
        self,
        kind: str,
        rows: list[Row],
        req: ChatRequest | CompletionRequest,
        prompt_tokens: int,
        prefill: str = "",
    ) -> StreamingResponse:
        tools = isinstance(req, ChatRequest) and req.tools_in_use() is not None
        meta = StreamMeta(
            kind,
            _new_id(kind),
            self.name,
            prompt_tokens,
            include_usage(req),
            tools,
            prefill,
            lambda result: self.logprobs(req, result),
        )
        response = stream_response(self.engine, rows, meta, req.stop_list())
        response.headers.update(clamped(rows, req))
        return response

    def constrained(self, req: ChatRequest) -> tuple[str, ConstraintFactory | None]:
        """The prefilled start of the reply and the grammar the rest follows: a forced call
        (`tool_choice` required or named; a 400 when the template has no call format to
        force), else `response_format`'s JSON, else nothing."""
        choice, tools = req.tool_choice, req.tools_in_use()
        grammars = self.engine.grammars
        if tools is not None and choice not in (None, "auto"):
            name = None if choice == "required" else choice.function.name  # type: ignore[union-attr]
            try:
                forced = forced_call(self.engine.render_chat, self.native_tools, name, tools)
            except Exception:  # a template that cannot render a call cannot be forced to
                forced = None
            if forced is None:
                raise ApiError(
                    "tool_choice: this model's chat template writes no <tool_call> block, so "
                    "a call cannot be enforced; use tool_choice 'auto'",
                    param="tool_choice",
                )
            return forced.prefill, grammars.lark(forced.grammar, "tool_choice")
        wanted = req.response_format
        if wanted is None or wanted.type == "text":
            return "", None
        if wanted.type == "json_object":
            return "", grammars.json_schema(ANY_OBJECT, "response_format")
        assert wanted.json_schema is not None  # checked by ResponseFormat
        param = "response_format.json_schema.schema"
        return "", grammars.json_schema(wanted.json_schema.json_schema, param)

    def chat_prompt(self, req: ChatRequest, prefill: str = "") -> list[int]:
        tools = req.tools_in_use()
        messages, template_tools = prepare_messages(
            [m.template_dict() for m in req.messages], tools, self.native_tools
        )
        try:
            return self.engine.chat_prompt(messages, template_tools, prefill)
        except Exception as err:  # template errors are the request's (or model's) fault
            raise ApiError(f"cannot render the chat template: {err}", param="messages") from None

    async def chat(self, request: Request) -> Response:
        answer = await self.chat_answer(await self.body(request))
        if isinstance(answer, StreamingResponse):
            return answer
        body, headers = answer
        return JSONResponse(body, headers=headers)

    async def responses(self, request: Request) -> Response:
        """`POST /v1/responses`: the chat completion it amounts to (`serve/responses.py`)."""
        given = await self.body(request)
        rid = new_id("resp")
        answer = await self.chat_answer(chat_request(given))
        if isinstance(answer, StreamingResponse):
            return reshaped(answer, _response_events(answer, ResponseStream(given, rid, self.name)))
        chat, headers = answer
        return JSONResponse(as_response(chat, given, rid), headers=headers)

    async def chat_answer(
        self, body: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, str]] | StreamingResponse:
        """A chat request's answer: the stream, or the chat.completion and its headers (the
        Responses route reshapes either)."""
        req = self.parse(body, "chat")
        assert isinstance(req, ChatRequest)
        prefill, constraint = self.constrained(req)
        prompt = self.chat_prompt(req, prefill)
        cap = self.settings.config.max_tokens_cap
        rows = _rows([prompt], req, self.engine.context, cap, constraint)
        if req.stream:
            return self.stream("chat", rows, req, len(prompt), prefill)
        results = await self.generate(rows)
        tools = req.tools_in_use() is not None
        choices = [
            _chat_choice(i, r, tools, prefill, self.logprobs(req, r)) for i, r in enumerate(results)
        ]
        return self.envelope("chat", choices, len(prompt), results), clamped(rows, req)

    async def completions(self, request: Request) -> Response:
        req = self.parse(await self.body(request), "text")
        assert isinstance(req, CompletionRequest)
        prompts = [self.token_ids(p) for p in req.prompts()]
        rows = _rows(prompts, req, self.engine.context, self.settings.config.max_tokens_cap)
        if req.stream:
            return self.stream("text", rows, req, sum(len(p) for p in prompts))
        results = await self.generate(rows)
        choices = []
        for i, (row, r) in enumerate(zip(rows, results, strict=True)):
            text = (self.engine.decode(list(row.prompt_ids)) if req.echo else "") + r.text
            choices.append(
                {
                    "index": i,
                    "text": text,
                    "finish_reason": r.finish_reason,
                    "logprobs": self.logprobs(req, r, row.prompt_ids[0] if req.echo else None),
                }
            )
        body = self.envelope("text", choices, sum(len(p) for p in prompts), results)
        return JSONResponse(body, headers=clamped(rows, req))

    def logprobs(
        self, req: ChatRequest | CompletionRequest, result: RowResult, first: int | None = None
    ) -> dict[str, Any] | None:
        """A choice's `logprobs` in the route's shape (None when not asked for); `first` is an
        echoed prompt's first token, which has none."""
        piece = self.engine.piece
        if isinstance(req, ChatRequest):
            top = req.row_logprobs()
            if top is None or result.logprobs is None:
                return None
            return chat_logprobs(result.logprobs, piece, top)
        if req.logprobs is None or result.logprobs is None:
            return None
        entries = [*(result.prompt_logprobs or ()), *result.logprobs]
        return completion_logprobs(entries, piece, req.logprobs, first)

    def token_ids(self, prompt: str | list[int]) -> list[int]:
        """A text prompt tokenized, or token ids checked against the vocabulary."""
        if isinstance(prompt, str):
            return self.engine.text_prompt(prompt)
        vocab = self.engine.vocab_size
        bad = next((i for i in prompt if not 0 <= i < vocab), None)
        if bad is not None:
            raise ApiError(f"prompt: token id {bad} is not in [0, {vocab})", param="prompt")
        return prompt

    def models(self, request: Request) -> dict[str, Any]:
        self.check_auth(request)
        return {"object": "list", "data": [self.model_card()]}

    def model(self, request: Request) -> dict[str, Any]:
        """`GET /v1/models/{id}` (the openai client's `models.retrieve`)."""
        self.check_auth(request)
        self.check_model(request.path_params["model"])
        return self.model_card()

    def model_card(self) -> dict[str, Any]:
        return {"id": self.name, "object": "model", "created": 0, "owned_by": "tuneloop"}


def create_app(engine: Engine, name: str, settings: ServerSettings) -> FastAPI:
    """The FastAPI app; the caller owns the engine's start and close."""
    app = FastAPI(title="tuneloop embedded server", docs_url=None, redoc_url=None)
    routes = _Routes(engine, name, settings)
    app.state.routes = routes

    async def guarded(handler: Any, request: Request) -> Response:
        try:
            result = handler(request)
            if asyncio.iscoroutine(result):
                result = await result
            return result if isinstance(result, Response) else JSONResponse(result)
        except ApiError as err:
            return _error(err)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {
            "status": "ok",
            "model": name,
            "running": engine.running,
            "waiting": engine.waiting,
            "cancelled": engine.rows_cancelled,
        }

    @app.get("/v1/models")
    async def models(request: Request) -> Response:
        return await guarded(routes.models, request)

    @app.get("/v1/models/{model:path}")
    async def model(request: Request) -> Response:
        return await guarded(routes.model, request)

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        return await guarded(routes.chat, request)

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        return await guarded(routes.completions, request)

    @app.post("/v1/responses")
    async def responses(request: Request) -> Response:
        return await guarded(routes.responses, request)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(
            ApiError(
                str(exc.detail),
                status=exc.status_code,
                type="not_found_error" if exc.status_code == 404 else "invalid_request_error",
            )
        )

    @app.exception_handler(Exception)
    async def internal(request: Request, exc: Exception) -> JSONResponse:
        return _error(ApiError(f"internal error: {exc!r}", status=500, type="server_error"))

    return app
