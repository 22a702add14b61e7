"""Shadow mirroring: a sampled fraction of live chat requests asked again of a challenger.

    tuneloop proxy --upstream http://127.0.0.1:8000 --log-dir traffic/ \
        --shadow http://127.0.0.1:8001 --shadow-model challenger --shadow-fraction 0.1
    mirror = Mirror(ShadowSettings(url=..., model="challenger", log_dir=Path("traffic")))
    Proxy(settings, mirror=mirror)

What it does. For each `POST /v1/chat/completions` the proxy forwards, `Mirror.ticket` decides
whether it is in the sample: `sha256(seed ":" body) < fraction` (the first 8 bytes as a number
in [0, 1)), so the same request body under the same seed is always in or always out: a replay
of the same traffic draws the same sample, and identical requests share one fate (a sample of
distinct requests, not of repeats). A sampled request's answer is copied (up to
`max_capture_bytes`) as it is relayed. Once the user's answer has gone out to its last byte,
`Mirror.launch` starts a background task — fire and forget — that sends the same body to the
shadow upstream with its `model` replaced by the challenger's name, and stores the pair
(prompt messages, both answers' text, latencies and token counts, or the challenger's error)
in `<log-dir>/shadow/pairs.jsonl` through `pairlog.PairLog` (scrubbed with the traffic log's
scrubber). `tuneloop shadow report` judges the pairs (`tuneloop.shadow`).

Never in the user's way: the challenger's answer is read only inside that task and never
written to any response; at most `concurrency` mirrors are in flight, and a sampled request
that finds them all busy is skipped and counted (`skipped_busy`) — a mirror never waits for a
slot, so it never delays a user. A challenger that is slow, failing or down shows up as
`failed` pairs, never as a user's error. Counts are on `GET /health` (`"shadow"`) and in
`<log-dir>/shadow/state.json`.

Streaming requests are mirrored, as non-streaming: the champion's text is the concatenation of
choice 0's deltas, and the challenger is asked with `stream` and `stream_options` removed (a
judge compares whole answers; the challenger's latency is then time to its whole answer, not
to its first token).

Where the challenger may be (`check_shadow`): a loopback address, or exactly the configured
`--upstream`'s origin (scheme, host, port) — a mirror sends users' prompts, so it goes nowhere
a person did not already send them. The upstream key goes with it only to that origin, as
`forward.py` decides for switched upstreams. Deliberately: the counters are plain integers
changed on the proxy's event loop (one uvicorn loop), so no lock is taken per request.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from starlette.types import Message, Scope, Send

from tuneloop.errors import InputError
from tuneloop.records.shadow import (
    SHADOW_FOLDER,
    ShadowAnswer,
    ShadowCounts,
    ShadowPair,
    ShadowState,
)
from tuneloop.serve.guard import is_loopback
from tuneloop.serve.proxy.pairlog import PairLog
from tuneloop.serve.proxy.relay import reason
from tuneloop.serve.proxy.shadow_answers import challenger_answer, champion_answer
from tuneloop.serve.proxy.urls import normalize_upstream, origin
from tuneloop.serve.traffic.files import now_iso

__all__ = ["Mirror", "ShadowSettings", "check_shadow", "in_sample"]

CHAT_PATH = "/v1/chat/completions"
DRAIN_S = 10.0
"""At shutdown, how long mirrors in flight may still finish before they are cancelled."""
_LOG = logging.getLogger("tuneloop.serve.proxy")


@dataclass(frozen=True)
class ShadowSettings:
    """Where and how much to mirror (`tuneloop proxy --shadow …`)."""

    url: str
    """The shadow upstream's base URL, as `check_shadow` returned it."""
    model: str
    """The name the challenger is asked for in place of the user's `model`."""
    log_dir: Path
    """The proxy's `--log-dir`; pairs go to its `shadow/` folder."""
    fraction: float
    """Share of chat-completion requests mirrored, in [0, 1] (`--shadow-fraction`)."""
    concurrency: int
    """Most mirrors in flight at once; a sampled request beyond them is skipped."""
    seed: int = 0
    """With the request body's hash, decides which requests are in the sample."""
    timeout_s: float = 120.0
    """Longest wait for the challenger's whole answer."""
    auth: str | None = None
    """`Authorization` sent to the challenger (only the configured upstream's key, only to
    its origin; see `shadow_auth`)."""
    max_capture_bytes: int = 8 << 20
    """A champion answer larger than this is not copied (the pair is skipped as unusable)."""


def check_shadow(url: str, upstream: str) -> str:
    """`url` normalized; InputError unless it is on loopback or has exactly the configured
    `upstream`'s origin (module docstring)."""
    base = normalize_upstream(url)
    allowed = origin(normalize_upstream(upstream))
    if is_loopback(urlsplit(base).hostname) or origin(base) == allowed:
        return base
    raise InputError(
        f"--shadow {url}: the challenger must be on a loopback address or at the configured "
        f"--upstream's origin ({allowed}): a mirror sends users' prompts, so it goes nowhere "
        "they are not already sent"
    )


def shadow_auth(url: str, upstream: str, upstream_key: str | None) -> str | None:
    """The upstream key as a Bearer value when `url` has the configured upstream's origin."""
    if upstream_key is None or origin(url) != origin(upstream):
        return None
    return f"Bearer {upstream_key}"


def in_sample(body: bytes, seed: int, fraction: float) -> bool:
    """Whether a request with this body is mirrored: sha256(seed ":" body) as a number in
    [0, 1) below `fraction` — deterministic per (seed, body)."""
    if fraction >= 1.0:
        return True
    if fraction <= 0.0:
        return False
    digest = hashlib.sha256(b"%d:" % seed + body).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64 < fraction


class Ticket:
    """One sampled request: its body, and a copy of the answer relayed to the user."""

    __slots__ = ("body", "cap", "chunks", "complete", "done_at", "size", "sse", "started", "status")

    def __init__(self, body: bytes, cap: int) -> None:
        self.body = body
        self.cap = cap
        self.started = time.perf_counter()
        self.status = 0
        self.sse = False
        self.chunks: list[bytes] = []
        self.size = 0
        self.complete = False
        self.done_at = 0.0

    def capturing(self, send: Send) -> Send:
        """`send`, copying the answer's bytes (up to `cap`) as they go out."""
        cap = self.cap

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.status = message["status"]
                self.sse = any(
                    k.lower() == b"content-type" and v.startswith(b"text/event-stream")
                    for k, v in message.get("headers", ())
                )
            elif message["type"] == "http.response.body":
                chunk = message.get("body", b"")
                self.size += len(chunk)
                if self.status == 200 and self.size <= cap and chunk:
                    self.chunks.append(chunk)
                if not message.get("more_body", False):
                    self.complete = self.status == 200 and self.size <= cap
                    self.done_at = time.perf_counter()
            await send(message)

        return sending


class Mirror:
    """Mirrors sampled chat requests to the challenger (module docstring)."""

    def __init__(self, settings: ShadowSettings) -> None:
        self.settings = settings
        self._counts = dict.fromkeys(
            ("mirrored", "failed", "skipped_busy", "skipped_sampled_out", "skipped_unusable"), 0
        )
        self._counts["lost"] = 0
        self._in_flight = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._sessions: dict[asyncio.AbstractEventLoop, aiohttp.ClientSession] = {}
        self.log = PairLog(settings.log_dir / SHADOW_FOLDER, snapshot=self.state)

    # ---- on the user's path: O(1) each ---------------------------------------------------

    def ticket(self, scope: Scope, body: bytes) -> Ticket | None:
        """A ticket when this request is a chat completion in the sample; counts the rest."""
        if scope["method"] != "POST" or scope["path"] != CHAT_PATH:
            return None
        if not in_sample(body, self.settings.seed, self.settings.fraction):
            self._counts["skipped_sampled_out"] += 1
            return None
        return Ticket(body, self.settings.max_capture_bytes)

    def launch(self, ticket: Ticket) -> None:
        """After the user's answer went out: start the mirror, or skip and count it."""
        if not ticket.complete:
            self._counts["skipped_unusable"] += 1
        elif self._in_flight >= self.settings.concurrency:
            self._counts["skipped_busy"] += 1
        else:
            self._in_flight += 1
            task = asyncio.get_running_loop().create_task(self._mirror(ticket))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    # ---- in the background ---------------------------------------------------------------

    async def _mirror(self, ticket: Ticket) -> None:
        try:
            pair = await self._pair(ticket)
            if pair is None:
                self._counts["skipped_unusable"] += 1
            elif await self.log.write(pair):
                self._counts["failed" if pair.challenger.text is None else "mirrored"] += 1
            else:
                self._counts["lost"] += 1
        except Exception:  # a mirror must never take the proxy down
            _LOG.exception("shadow mirror failed")
            self._counts["lost"] += 1
        finally:
            self._in_flight -= 1

    async def _pair(self, ticket: Ticket) -> ShadowPair | None:
        """The pair for `ticket`, the challenger asked; None when the request or the
        champion's answer is not a chat exchange with text."""
        try:
            request = json.loads(ticket.body)
        except ValueError:
            return None
        messages = request.get("messages") if isinstance(request, dict) else None
        if not isinstance(messages, list):
            return None
        champion = champion_answer(
            b"".join(ticket.chunks), ticket.sse, ticket.done_at - ticket.started
        )
        if champion is None:
            return None
        challenger = await self._ask(request)
        digest = hashlib.sha256(ticket.body).hexdigest()
        model = request.get("model")
        return ShadowPair(
            request_id=champion.completion_id or f"sha256:{digest[:16]}",
            request_sha256=digest,
            timestamp=now_iso(),
            model=model if isinstance(model, str) else None,
            challenger_model=self.settings.model,
            streamed=bool(request.get("stream")),
            messages=messages,
            champion=champion.answer,
            challenger=challenger,
        )

    async def _ask(self, request: dict[str, Any]) -> ShadowAnswer:
        """The challenger's answer to `request` as non-streaming, or its error; never raises."""
        body = {k: v for k, v in request.items() if k not in ("stream", "stream_options")}
        body["model"] = self.settings.model
        headers = {"content-type": "application/json"}
        if self.settings.auth is not None:
            headers["authorization"] = self.settings.auth
        started = time.perf_counter()
        timeout = aiohttp.ClientTimeout(total=self.settings.timeout_s)
        try:
            async with self._session().post(
                self.settings.url + CHAT_PATH, json=body, headers=headers, timeout=timeout
            ) as answer:
                status, raw = answer.status, await answer.read()
        except asyncio.TimeoutError:
            error = f"timed out after {self.settings.timeout_s:g} s"
            return ShadowAnswer(text=None, error=error, latency_s=time.perf_counter() - started)
        except aiohttp.ClientError as err:
            latency = time.perf_counter() - started
            return ShadowAnswer(text=None, error=reason(err), latency_s=latency)
        return challenger_answer(status, raw, time.perf_counter() - started)

    def _session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        session = self._sessions.get(loop)
        if session is None or session.closed:
            connector = aiohttp.TCPConnector(limit=self.settings.concurrency)
            session = aiohttp.ClientSession(
                connector=connector, cookie_jar=aiohttp.DummyCookieJar()
            )
            self._sessions[loop] = session
        return session

    # ---- state ---------------------------------------------------------------------------

    def counts(self) -> ShadowCounts:
        return ShadowCounts(**self._counts, in_flight=self._in_flight)

    def state(self) -> ShadowState:
        """The settings and counts, as `state.json` holds them."""
        s = self.settings
        return ShadowState(
            updated=now_iso(),
            challenger=s.url,
            challenger_model=s.model,
            fraction=s.fraction,
            seed=s.seed,
            concurrency=s.concurrency,
            counts=self.counts(),
        )

    def health(self) -> dict[str, Any]:
        """What `GET /health` says under `"shadow"`."""
        out: dict[str, Any] = {"challenger_model": self.settings.model}
        out["fraction"] = self.settings.fraction
        out["counts"] = self.counts().model_dump()
        if self.log.error is not None:
            out["error"] = self.log.error
        return out

    async def aclose(self) -> None:
        """Let mirrors in flight finish (up to `DRAIN_S`), cancel the rest, close this loop's
        session, and write the final `state.json`."""
        pending = [t for t in self._tasks if t.get_loop() is asyncio.get_running_loop()]
        if pending:
            _, late = await asyncio.wait(pending, timeout=DRAIN_S)
            for task in late:
                task.cancel()
            self._counts["lost"] += len(late)
            if late:
                await asyncio.wait(late, timeout=1.0)
        session = self._sessions.pop(asyncio.get_running_loop(), None)
        if session is not None:
            await session.close()
        await asyncio.to_thread(self.log.close)
