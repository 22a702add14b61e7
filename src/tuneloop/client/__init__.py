"""Shared library: the async OpenAI-compatible client that evaluate and replay both call.

    from tuneloop.client import OpenAIClient, RequestFailed
    async with OpenAIClient(base_url, api_key=key, concurrency=8) as client:
        done = await client.complete(payload, chat=True)

`completions.py` is the client (retries with full-jitter backoff, infrastructure errors never
scored, every error message redacted); `http.py` its transports (a lean HTTP/1.1 keep-alive
pool for plain http, httpx otherwise); `replicas.py` spreads the same calls over several
replicas of one model, routing around a failed one. It lived inside `evaluate/` until a second phase
(replay) needed it; a phase never imports another phase, so it moved down here.
"""

from tuneloop.client.completions import (
    REFUSED_STATUS,
    RETRY_STATUS,
    Completion,
    EndpointRefused,
    MalformedResponse,
    OpenAIClient,
    RequestFailed,
    RetryableFailure,
    api_base,
    backoff_delay,
    parse_response,
)
from tuneloop.client.replicas import ReplicaClient, ReplicaStats, client_for

__all__ = [
    "REFUSED_STATUS",
    "RETRY_STATUS",
    "Completion",
    "EndpointRefused",
    "MalformedResponse",
    "OpenAIClient",
    "ReplicaClient",
    "ReplicaStats",
    "RequestFailed",
    "RetryableFailure",
    "api_base",
    "backoff_delay",
    "client_for",
    "parse_response",
]
