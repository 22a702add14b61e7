"""An async client for OpenAI-compatible endpoints, with retries that never reach a score.

    async with OpenAIClient("http://127.0.0.1:8000", concurrency=32) as client:
        done = await client.complete({"model": "tiny", "messages": [...], "seed": 7}, chat=True)
        body, latency_s = await client.request(payload, chat=True)  # the raw 200 body

Shared by the phases that call a model over HTTP (evaluate, replay): `complete` parses the
body into a text `Completion`; `request` returns the body itself for a caller that reads more
of it (replay keeps a teacher's tool calls).

Chat items go to `/v1/chat/completions`, `prompt` items to `/v1/completions`; the endpoint may
be given as the server root or as its `/v1`. The transport is `http.py` (a lean keep-alive
pool for plain http, httpx otherwise). Connection errors, timeouts, 408, 429 and 5xx are
retried with exponential backoff and full jitter (AWS Architecture Blog, "Exponential Backoff
and Jitter", 2015), honouring a `Retry-After` header, up to `max_retries`; after that the sample
stays missing (`RequestFailed`). 401/403/404 mean the endpoint, key or model name is wrong and
stop the eval at once (`EndpointRefused`). Every error message is redacted
(`envkeys.Redactor`): the API key by value and anything shaped like a credential, before the
body is shortened, since servers echo request headers back in error bodies. A 200 whose body
is not a well-formed completion is the model side's problem, not the network's: it raises
`MalformedResponse` and is recorded as a harness error, never retried.

Deliberately one request per (item, sample) with its own seed rather than `n`>1 per request:
seeds then match between the pre and post evals sample for sample, and a lost request costs
one sample, not the item's batch.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from dataclasses import dataclass
from typing import Any

from tuneloop.client.http import Http11Pool, HttpxTransport, TransportFailure, transport_for
from tuneloop.envkeys import Redactor
from tuneloop.tiers import CascadeTrace, read_trace

_ERROR_BYTES = 16384
"""Bytes of an error body read for the message (which keeps its first 200 characters)."""
RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
REFUSED_STATUS = frozenset({401, 403, 404})


@dataclass(frozen=True)
class TokenLogprob:
    """One answer token as the server scored it: its log-probability, and those of the most
    likely tokens at its position (`top_logprobs`), highest first."""

    logprob: float
    top: tuple[float, ...]


@dataclass(frozen=True)
class Completion:
    text: str
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_s: float
    logprobs: tuple[TokenLogprob, ...] | None = None
    """The answer's tokens with their log-probabilities, when the server returned them."""
    cascade: CascadeTrace | None = None
    """How a cascade server answered (`tuneloop.tiers`); None from a single model."""


class RequestFailed(Exception):
    """No completion after all retries (or a non-retryable 4xx): the sample stays missing."""


class EndpointRefused(Exception):
    """401/403/404: wrong endpoint, key or model name; retrying cannot help."""


class RetryableFailure(Exception):
    """One attempt failed in a way a retry may cure; `delay_s` is the server's Retry-After."""

    def __init__(self, message: str, delay_s: float | None) -> None:
        super().__init__(message)
        self.message = message
        self.delay_s = delay_s


class MalformedResponse(Exception):
    """A 200 whose body is not a completion (untrusted output): recorded as a harness error."""


def api_base(base_url: str) -> str:
    """The `/v1` base for a server root or a `/v1` URL."""
    base = base_url.rstrip("/")
    return base if base.endswith("/v1") else base + "/v1"


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def parse_response(body: bytes, latency_s: float, *, chat: bool) -> Completion:
    """The completion in a response body; anything malformed raises MalformedResponse."""
    try:
        data = json.loads(body)
        choice = data["choices"][0]
    except (ValueError, KeyError, IndexError, TypeError) as err:
        raise MalformedResponse(f"response is not a completion: {type(err).__name__}") from None
    if not isinstance(choice, dict):
        raise MalformedResponse("choices[0] is not an object")
    if chat:
        message = choice.get("message")
        text = message.get("content") if isinstance(message, dict) else None
    else:
        text = choice.get("text")
    if not isinstance(text, str):
        raise MalformedResponse(f"completion text is {type(text).__name__}, not a string")
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    finish = choice.get("finish_reason")
    try:
        cascade = read_trace(data)
    except ValueError as err:
        raise MalformedResponse(f"the cascade's trace is malformed: {err}") from None
    return Completion(
        text=text,
        finish_reason=finish if isinstance(finish, str) else None,
        prompt_tokens=_int_or_none(usage.get("prompt_tokens")),
        completion_tokens=_int_or_none(usage.get("completion_tokens")),
        latency_s=latency_s,
        logprobs=_token_logprobs(choice.get("logprobs"), chat=chat),
        cascade=cascade,
    )


def _token_logprobs(found: Any, *, chat: bool) -> tuple[TokenLogprob, ...] | None:
    """The `logprobs` of a choice in OpenAI's chat shape (`content: [{logprob, top_logprobs:
    [{logprob}]}]`) or completions shape (`token_logprobs`, `top_logprobs: [{token:
    logprob}]`); None when absent. Malformed ones (untrusted output) raise MalformedResponse."""
    if found is None:
        return None
    try:
        if chat:
            content = found["content"]
            pairs = [
                (e["logprob"], [t["logprob"] for t in e.get("top_logprobs") or []]) for e in content
            ]
        else:
            tops = found.get("top_logprobs") or [None] * len(found["token_logprobs"])
            pairs = [
                (lp, list(top.values()) if isinstance(top, dict) else [])
                for lp, top in zip(found["token_logprobs"], tops, strict=True)
            ]
        out = tuple(
            TokenLogprob(float(lp), tuple(sorted((float(t) for t in top), reverse=True)))
            for lp, top in pairs
        )
    except (KeyError, TypeError, ValueError) as err:
        raise MalformedResponse(f"logprobs are malformed: {type(err).__name__}: {err}") from None
    if any(math.isnan(t.logprob) or t.logprob > 0 for t in out):
        raise MalformedResponse("logprobs are malformed: a log-probability above 0 or NaN")
    return out


def backoff_delay(attempt: int, base_s: float, cap_s: float = 10.0) -> float:
    """Full jitter: uniform(0, min(cap, base · 2^attempt))."""
    return random.uniform(0.0, min(cap_s, base_s * 2**attempt))


def _retry_after(headers: dict[str, str]) -> float | None:
    value = headers.get("retry-after")
    try:
        return min(30.0, max(0.0, float(value))) if value is not None else None
    except ValueError:
        return None


class OpenAIClient:
    """Posts completion requests with retries; counts the retries it performed."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        concurrency: int = 32,
        timeout_s: float = 120.0,
        max_retries: int = 8,
        backoff_s: float = 0.25,
    ) -> None:
        self.base = api_base(base_url)
        self.api_key = api_key
        self.redact = Redactor((api_key,)).text
        """Applied to every error message: a server may echo the key (or another) back."""
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.retries = 0
        self.last_error: str | None = None
        self._transport: Http11Pool | HttpxTransport | None = None

    async def __aenter__(self) -> OpenAIClient:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        self._transport = transport_for(
            self.base, timeout_s=self.timeout_s, headers=headers, concurrency=self.concurrency
        )
        await self._transport.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._transport is not None:
            await self._transport.__aexit__(*exc)

    async def complete(self, payload: dict[str, Any], chat: bool) -> Completion:
        """POST one request, retrying infrastructure failures; see the module docstring."""
        return parse_response(*await self.request(payload, chat), chat=chat)

    async def request(self, payload: dict[str, Any], chat: bool) -> tuple[bytes, float]:
        """(body, latency in seconds) of the first 200 answer to one request, retrying
        infrastructure failures; RequestFailed or EndpointRefused otherwise."""
        path, body = request_target(payload, chat)
        for attempt in range(self.max_retries + 1):
            try:
                return await self.attempt(path, body)
            except RetryableFailure as err:
                error, delay = err.message, err.delay_s
            self.last_error = error
            if attempt == self.max_retries:
                raise RequestFailed(f"{error} (after {self.max_retries} retries)")
            self.retries += 1
            await asyncio.sleep(
                delay if delay is not None else backoff_delay(attempt, self.backoff_s)
            )
        raise AssertionError("unreachable")

    async def attempt(self, path: str, body: bytes) -> tuple[bytes, float]:
        """One POST, no retry: (body, latency) of a 200; `RetryableFailure` for what a retry
        may cure (connection, timeout, 408/429/5xx), EndpointRefused or RequestFailed else."""
        assert self._transport is not None, "use `async with OpenAIClient(...)`"
        started = time.perf_counter()
        try:
            status, headers, data = await self._transport.post(path, body)
        except TransportFailure as err:
            raise RetryableFailure(self.redact(str(err)), None) from None
        if status == 200:
            return data, time.perf_counter() - started
        # redact first, then shorten: a key cut in half is no longer recognised
        text = self.redact(data[:_ERROR_BYTES].decode(errors="replace"))[:200]
        error = self.redact(f"HTTP {status} from {self.base}{path}: {text}")
        if status in REFUSED_STATUS:
            raise EndpointRefused(error)
        if status not in RETRY_STATUS:
            raise RequestFailed(error)
        raise RetryableFailure(error, _retry_after(headers))


def request_target(payload: dict[str, Any], chat: bool) -> tuple[str, bytes]:
    """(path under /v1, JSON body) of one completion request."""
    return ("/chat/completions" if chat else "/completions"), json.dumps(payload).encode()
