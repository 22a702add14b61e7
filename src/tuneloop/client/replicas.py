"""One model served by several replicas: spread the requests, route around a failed one.

    async with ReplicaClient(["http://gpu0:8000", "http://gpu1:8000"], concurrency=32) as c:
        done = await c.complete(payload, chat=True)   # the same calls as OpenAIClient

For separate servers of the same weights — one vLLM per GPU or per node, several embedded
servers — rather than one server that balances internally (vLLM's `--data-parallel-size`
behind one API server needs no client help). `concurrency` is per replica, as each server's
batch is: N replicas take N × concurrency requests in flight.

Each request goes to the healthy replica with the fewest requests in flight. An attempt that
fails for infrastructure reasons (connection refused or reset, timeout, 408/429/5xx) takes its
replica out of rotation for a cooldown that doubles with each consecutive failure (from
`backoff_s`, capped at 10 s, or the server's `Retry-After`), and the request is retried at once
on another replica; after the cooldown one request probes the replica, and a success puts it
back. The retry budget (`max_retries`) belongs to the request, whichever replicas it visits, so
a request that every replica fails ends as `RequestFailed` (a missing sample, never a score),
exactly as with one endpoint. 401/403/404 still stop the eval (`EndpointRefused`): a replica
that refuses the model name is a configuration error, not an outage.

Deliberately, which replica answered is not part of the answer: the payload (seed included)
does not depend on the replica, so under greedy decoding the completion, and the scored row,
are the same whichever replica served it; the per-replica counts are kept for the summary.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack, suppress
from dataclasses import dataclass
from typing import Any

from tuneloop.client.completions import (
    Completion,
    OpenAIClient,
    RequestFailed,
    RetryableFailure,
    parse_response,
    request_target,
)

COOLDOWN_CAP_S = 10.0


@dataclass
class ReplicaStats:
    """What one replica did in this run."""

    endpoint: str
    served: int = 0
    """Requests it answered with a 200."""
    failed: int = 0
    """Attempts on it that failed for infrastructure reasons (each retried elsewhere)."""


@dataclass
class _Replica:
    client: OpenAIClient
    stats: ReplicaStats
    in_flight: int = 0
    down_until: float = 0.0
    """monotonic time before which it gets no request."""
    failures: int = 0
    """Consecutive failed attempts; > 0 means the next request is a probe, sent alone."""

    def available(self, now: float, limit: int) -> bool:
        if self.down_until > now:
            return False
        return self.in_flight == 0 if self.failures else self.in_flight < limit


def client_for(base_urls: Sequence[str], **options: Any) -> OpenAIClient | ReplicaClient:
    """The plain client for one URL (exactly as before replicas), a ReplicaClient for more;
    `options` are the clients' keyword arguments (api_key, concurrency, timeouts, retries)."""
    if len(base_urls) == 1:
        return OpenAIClient(base_urls[0], **options)
    return ReplicaClient(base_urls, **options)


class ReplicaClient:
    """OpenAIClient's `complete`/`request` over several replicas; counts retries as it does."""

    def __init__(
        self,
        base_urls: Sequence[str],
        *,
        api_key: str | None = None,
        concurrency: int = 32,
        timeout_s: float = 120.0,
        max_retries: int = 8,
        backoff_s: float = 0.25,
    ) -> None:
        if not base_urls:
            raise ValueError("ReplicaClient needs at least one base URL")
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.retries = 0
        self.last_error: str | None = None
        self.replicas = [
            _Replica(
                OpenAIClient(
                    url,
                    api_key=api_key,
                    concurrency=concurrency,
                    timeout_s=timeout_s,
                    max_retries=0,
                ),
                ReplicaStats(url),
            )
            for url in base_urls
        ]
        self._changed = asyncio.Condition()
        self._stack = AsyncExitStack()

    @property
    def stats(self) -> list[ReplicaStats]:
        return [r.stats for r in self.replicas]

    async def __aenter__(self) -> ReplicaClient:
        for replica in self.replicas:
            await self._stack.enter_async_context(replica.client)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    async def complete(self, payload: dict[str, Any], chat: bool) -> Completion:
        """As OpenAIClient.complete, on whichever replica is free and healthy."""
        return parse_response(*await self.request(payload, chat), chat=chat)

    async def request(self, payload: dict[str, Any], chat: bool) -> tuple[bytes, float]:
        """(body, latency) of the first 200 from any replica; RequestFailed once the request
        has used up `max_retries`, EndpointRefused at once."""
        path, body = request_target(payload, chat)
        avoid: _Replica | None = None
        for attempt in range(self.max_retries + 1):
            replica = await self._acquire(avoid)
            try:
                result = await replica.client.attempt(path, body)
            except RetryableFailure as err:
                self._failed(replica, err)
                error, avoid = err.message, replica
            else:
                replica.failures = 0
                replica.stats.served += 1
                return result
            finally:
                replica.in_flight -= 1
                async with self._changed:
                    self._changed.notify_all()
            self.last_error = error
            if attempt == self.max_retries:
                raise RequestFailed(f"{error} (after {self.max_retries} retries)")
            self.retries += 1
        raise AssertionError("unreachable")

    def _failed(self, replica: _Replica, err: RetryableFailure) -> None:
        replica.stats.failed += 1
        now = time.monotonic()
        if replica.down_until > now:
            return  # another request in flight when it went down: the same outage
        replica.failures += 1
        cooldown = err.delay_s
        if cooldown is None:
            cooldown = min(COOLDOWN_CAP_S, self.backoff_s * 2 ** (replica.failures - 1))
        replica.down_until = now + cooldown

    async def _acquire(self, avoid: _Replica | None) -> _Replica:
        """The least busy available replica (another than `avoid` when there is one), its
        slot taken; waits for a slot or for the end of the earliest cooldown."""
        async with self._changed:
            while True:
                now = time.monotonic()
                free = [r for r in self.replicas if r.available(now, self.concurrency)]
                others = [r for r in free if r is not avoid] or free
                if others:
                    best = min(others, key=lambda r: r.in_flight)
                    best.in_flight += 1
                    return best
                waking = [r.down_until for r in self.replicas if r.down_until > now]
                timeout = min(waking) - now if waking else None
                with suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), timeout)
