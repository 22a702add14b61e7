"""The OpenAI wire format the embedded server speaks: request models, limits, error bodies.

Pure: no torch, no FastAPI. `parse_chat` / `parse_completion` turn a raw request body into a
validated request or raise `ApiError`, which the app renders as an OpenAI-style error body
(`{"error": {"message", "type", "param", "code"}}`) with status 400 — so malformed JSON,
unknown types or out-of-range values never reach the engine and never become a 500.

Chat requests may carry `tools` (function tools whose `parameters` must be a valid JSON
Schema: a bad one is a 400 naming `tools.N.function.parameters`), `tool_choice`, `tool` role
messages and assistant messages with `tool_calls`; `stream` (with
`stream_options.include_usage`) works for both routes.

`logprobs` (with `top_logprobs` on chat, up to 20) and, on completions, `echo` are served
(`logprobs.py`). Deliberate deviations from the OpenAI API: `logit_bias`, `best_of`,
`suffix` and a non-zero `presence_penalty` or `frequency_penalty` are refused with a 400 rather
than ignored, because silently dropping them would return something other than what was asked
for (a zero, `false`, `{}` or `null` — what some clients send by default — asks for nothing).
`response_format` (`json_object`, `json_schema`) and `tool_choice: "required"` or a named
function are enforced by constrained decoding (`constrain.py`, `tools.forced_call`). Unknown
extra fields are ignored (clients send vendor extensions).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from fastapi import Request
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from tuneloop.config import ServerConfig
from tuneloop.serve.api_error import ApiError

MAX_N = 128
"""Most samples one request may ask for (each becomes a row in a generate batch)."""
MAX_STOP = 4
"""OpenAI's limit on stop strings."""
MAX_TOP = 20
"""Most alternatives a position may report (`top_logprobs`, completions' `logprobs`), vLLM's
default `max_logprobs`; OpenAI allows 20 on chat and 5 on completions."""

UNSUPPORTED = (
    "logit_bias",
    "best_of",
    "suffix",
    "presence_penalty",
    "frequency_penalty",
)
UNSET: tuple[Any, ...] = (None, False, 0, {}, [])
"""Values of an unsupported field that ask for nothing (clients send some by default)."""


def json_schema(value: dict[str, Any]) -> dict[str, Any]:
    """`value` when it is a valid JSON Schema (its own draft's metaschema), else ValueError."""
    from jsonschema import SchemaError, validators

    try:
        validators.validator_for(value).check_schema(value)
    except SchemaError as err:
        raise ValueError(f"not a valid JSON Schema: {err.message}") from None
    return value


class FunctionCall(BaseModel):
    """The function part of an assistant's earlier tool call."""

    model_config = ConfigDict(extra="ignore")

    name: str
    """The function called."""
    arguments: str | dict[str, Any] = "{}"
    """Its arguments: a JSON object string (OpenAI) or the object itself."""


class ToolCallIn(BaseModel):
    """A tool call in an assistant message of the conversation."""

    model_config = ConfigDict(extra="ignore")

    id: str | None = None
    """The call's id, echoed by the `tool` message that answers it."""
    type: Literal["function"] = "function"
    """Only function calls exist."""
    function: FunctionCall
    """What was called."""


class Message(BaseModel):
    """One chat turn. Content parts (lists) are accepted when they are all text."""

    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "user", "assistant", "developer", "tool"]
    """Who speaks; `developer` is treated as `system` by most chat templates; `tool` carries
    a tool's result."""
    content: str | list[dict[str, Any]] | None = None
    """Text, or OpenAI content parts of type `text`; may be null only for an assistant turn
    that makes tool calls."""
    tool_calls: list[ToolCallIn] | None = None
    """An assistant turn's calls."""
    tool_call_id: str | None = None
    """For a `tool` turn: the call it answers."""
    name: str | None = None
    """Optional speaker or tool name."""

    @field_validator("content")
    @classmethod
    def _text_only(
        cls, value: str | list[dict[str, Any]] | None
    ) -> str | list[dict[str, Any]] | None:
        if isinstance(value, list):
            if not all(p.get("type") == "text" and isinstance(p.get("text"), str) for p in value):
                raise ValueError("only text content parts are supported")
            return "".join(p["text"] for p in value)
        return value

    @model_validator(mode="after")
    def _has_content(self) -> Message:
        if self.content is None and not (self.role == "assistant" and self.tool_calls):
            raise ValueError("content is required (null only for an assistant's tool calls)")
        if self.tool_calls is not None and self.role != "assistant":
            raise ValueError("only assistant messages carry tool_calls")
        return self

    def template_dict(self) -> dict[str, Any]:
        """The turn as chat templates take it (no nulls)."""
        return self.model_dump(exclude_none=True)


class FunctionSpec(BaseModel):
    """A function the model may call."""

    model_config = ConfigDict(extra="ignore")

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    """The function's name (letters, digits, `_`, `-`, `.`; at most 64)."""
    description: str | None = None
    """What it does, for the model."""
    parameters: dict[str, Any] | None = None
    """Its arguments as a JSON Schema object."""
    strict: bool | None = None
    """Accepted and not enforced (no constrained decoding here)."""

    @field_validator("parameters")
    @classmethod
    def _json_schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        return value if value is None else json_schema(value)


class Tool(BaseModel):
    """One entry of `tools`."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["function"]
    """Only function tools exist."""
    function: FunctionSpec
    """The function offered."""


class NamedFunction(BaseModel):
    name: str
    """The function the caller wants called."""


class NamedToolChoice(BaseModel):
    """`tool_choice: {"type": "function", "function": {"name": ...}}`."""

    type: Literal["function"]
    """Only functions can be named."""
    function: NamedFunction
    """Which one."""


class JsonSchemaFormat(BaseModel):
    """`response_format.json_schema`: the schema the reply's content must be valid against."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    name: str = Field(default="response", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    """The format's name (OpenAI requires one; it is not used)."""
    description: str | None = None
    json_schema: dict[str, Any] = Field(default_factory=dict, alias="schema")
    """The JSON Schema (the wire name is `schema`)."""
    strict: bool | None = None
    """Accepted; the schema is enforced either way (constrained decoding, `constrain.py`)."""

    @field_validator("json_schema")
    @classmethod
    def _valid(cls, value: dict[str, Any]) -> dict[str, Any]:
        return json_schema(value)


class ResponseFormat(BaseModel):
    """`response_format`: free text, any JSON object, or JSON valid against a schema."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None

    @model_validator(mode="after")
    def _schema_given(self) -> ResponseFormat:
        if self.type == "json_schema" and self.json_schema is None:
            raise ValueError("response_format of type json_schema needs json_schema")
        return self


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")

    include_usage: bool = False
    """Send one last chunk with empty `choices` and the request's token usage."""


class _Sampling(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: str
    """The served model name; requests for another name get a 404."""
    n: int = Field(default=1, ge=1, le=MAX_N)
    """Samples per prompt."""
    temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    """0 means greedy decoding."""
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    """Nucleus mass."""
    max_tokens: int | None = Field(default=None, ge=1)
    """Completion length limit; None means the server's cap. More than the cap or than the
    context leaves is clamped to that (routes.py says so in a header)."""
    stop: str | list[str] | None = None
    """Up to 4 stop strings; the completion is cut before the first one."""
    seed: int | None = None
    """Per-request seed; sample i of the request draws from a generator seeded by (seed, i)."""
    stream: bool = False
    """Send the completion as server-sent events, chunk by chunk."""
    stream_options: StreamOptions | None = None
    """Streaming options; only `include_usage` is read."""

    @field_validator("stop")
    @classmethod
    def _stops(cls, value: str | list[str] | None) -> str | list[str] | None:
        stops = [value] if isinstance(value, str) else value or []
        if len(stops) > MAX_STOP:
            raise ValueError(f"at most {MAX_STOP} stop strings")
        if any(s == "" for s in stops):
            raise ValueError("stop strings must be non-empty")
        return value

    def stop_list(self) -> tuple[str, ...]:
        if self.stop is None:
            return ()
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)


class ChatRequest(_Sampling):
    """`POST /v1/chat/completions`."""

    messages: list[Message] = Field(min_length=1)
    """The conversation; rendered with the model's chat template."""
    max_completion_tokens: int | None = Field(default=None, ge=1)
    """Newer name for max_tokens; wins when both are given."""
    tools: list[Tool] | None = None
    """Functions the model may call, rendered with the chat template (`tools.py`)."""
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    """`none` leaves the tools out of the prompt and reads no calls; `auto` (the default
    with tools), `required` and a named function render them and read calls back; the last
    two also prefill the start of a call, so that the model writes one (`tools.py`)."""
    response_format: ResponseFormat | None = None
    """`json_object` or `json_schema`: the content is decoded under that grammar
    (`constrain.py`); a forced tool call, when there is one, takes precedence."""
    logprobs: bool | None = None
    """Return each generated token's log-probability (`choices[].logprobs.content`)."""
    top_logprobs: int | None = Field(default=None, ge=0, le=MAX_TOP)
    """And the likeliest alternatives at each position (needs `logprobs`)."""

    @model_validator(mode="after")
    def _tool_choice_names_a_tool(self) -> ChatRequest:
        choice = self.tool_choice
        if choice not in (None, "none") and not self.tools:
            raise ValueError("tool_choice needs tools")
        if isinstance(choice, NamedToolChoice):
            names = {t.function.name for t in self.tools or []}
            if choice.function.name not in names:
                raise ValueError(f"tool_choice names {choice.function.name!r}, not in tools")
        return self

    @model_validator(mode="after")
    def _top_logprobs_need_logprobs(self) -> ChatRequest:
        if self.top_logprobs and not self.logprobs:
            raise ValueError("top_logprobs needs logprobs: true")
        return self

    def row_logprobs(self) -> int | None:
        """Alternatives per generated token (None: no logprobs asked for)."""
        return (self.top_logprobs or 0) if self.logprobs else None

    def tools_in_use(self) -> list[dict[str, Any]] | None:
        """The tools to render and read calls for (None without tools or with `none`)."""
        if not self.tools or self.tool_choice == "none":
            return None
        return [t.model_dump(exclude_none=True) for t in self.tools]


Prompt = str | list[str] | list[int] | list[list[int]]
"""What `/v1/completions` takes as `prompt`, as OpenAI and vLLM do: text, texts, one prompt's
token ids (lm-eval's `local-completions` sends these by default), or several."""


class CompletionRequest(_Sampling):
    """`POST /v1/completions`."""

    prompt: Prompt
    """One raw prompt or a list of them, as text or token ids (choices are ordered
    prompt-major); token ids are taken as given (no special tokens added)."""

    max_tokens: int | None = Field(default=16, ge=1)
    """OpenAI's default for text completions is 16 tokens."""
    logprobs: int | None = Field(default=None, ge=0, le=MAX_TOP)
    """Each generated token's log-probability and this many alternatives (legacy shape)."""
    echo: bool = False
    """The prompt comes back before the completion; with `logprobs`, scored too (the first
    prompt token has none): what lm-eval's loglikelihood tasks read."""

    @model_validator(mode="after")
    def _echo_is_not_streamed(self) -> CompletionRequest:
        if self.echo and self.stream:
            raise ValueError("echo: not with stream (ask without streaming)")
        return self

    @field_validator("prompt")
    @classmethod
    def _nonempty(cls, value: Prompt) -> Prompt:
        if isinstance(value, list) and not value:
            raise ValueError("prompt list must not be empty")
        nested = isinstance(value, list) and isinstance(value[0], list)
        if nested and any(not ids for ids in value):  # type: ignore[union-attr]
            raise ValueError("a token-id prompt must not be empty")
        return value

    def prompts(self) -> list[str | list[int]]:
        """Each prompt: a text, or a list of token ids."""
        value = self.prompt
        if isinstance(value, str) or (value and isinstance(value[0], int)):
            return [value]  # type: ignore[list-item]
        return list(value)  # type: ignore[arg-type]


Limits = ServerConfig
"""Server-side caps checked before a request reaches the engine (`max_tokens_cap`,
`max_body_bytes`, `max_rows`): the embedded server's settings, one definition."""


def decode_body(raw: bytes, limits: Limits) -> dict[str, Any]:
    """Parse a JSON object body, or raise `ApiError` (413 for an oversized body)."""
    if len(raw) > limits.max_body_bytes:
        raise ApiError(
            f"request body is {len(raw)} bytes; the limit is {limits.max_body_bytes}",
            status=413,
            code="request_too_large",
        )
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ApiError(f"request body is not valid JSON: {err}", code="invalid_json") from None
    if not isinstance(body, dict):
        raise ApiError("request body must be a JSON object", code="invalid_json")
    for key in UNSUPPORTED:
        if body.get(key) not in UNSET:
            raise ApiError(f"{key!r} is not supported by this server", param=key)
    return body


def _validate(cls: type[_Sampling], body: dict[str, Any]) -> Any:
    try:
        return cls.model_validate(body)
    except ValidationError as err:
        first = err.errors()[0]
        # A model-level check (e.g. tool_choice against tools) reports no location: name the
        # field it is about.
        param = _loc(first["loc"]) or _model_param(first["msg"])
        raise ApiError(f"{param}: {first['msg']}", param=param, code="invalid_value") from None


def _loc(loc: tuple[int | str, ...]) -> str | None:
    """`messages.0.role` from pydantic's location, leaving out union-member tags such as
    `literal['none','auto','required']`."""
    parts = [str(p) for p in loc if isinstance(p, int) or str(p).isidentifier()]
    return ".".join(parts) or None


def _model_param(message: str) -> str | None:
    return next((p for p in MODEL_PARAMS if p in message), None)


MODEL_PARAMS = ("tool_choice", "top_logprobs", "echo", "response_format")
"""Fields the model-level checks are about, named by their messages."""


def parse_chat(body: dict[str, Any], limits: Limits) -> ChatRequest:
    """Validate a chat completion request against the schema and the server's caps."""
    req: ChatRequest = _validate(ChatRequest, body)
    if req.max_completion_tokens is not None:
        req.max_tokens = req.max_completion_tokens
    return req


def parse_completion(body: dict[str, Any], limits: Limits) -> CompletionRequest:
    """Validate a text completion request against the schema and the server's caps."""
    req: CompletionRequest = _validate(CompletionRequest, body)
    prompts = len(req.prompts())
    if prompts * req.n > limits.max_rows:
        raise ApiError(
            f"{prompts} prompts × n={req.n} exceeds this server's {limits.max_rows} rows",
            param="n",
        )
    return req


def include_usage(req: _Sampling) -> bool:
    """Whether a streamed response ends with a usage chunk."""
    return bool(req.stream_options and req.stream_options.include_usage)


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


async def read_capped_body(request: Request, limit: int) -> bytes:
    """The body, refusing early once it exceeds `limit` (before reading it all)."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise ApiError(
            f"request body is {declared} bytes; the limit is {limit}",
            status=413,
            code="request_too_large",
        )
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError(
                f"request body exceeds {limit} bytes", status=413, code="request_too_large"
            )
        chunks.append(chunk)
    return b"".join(chunks)
