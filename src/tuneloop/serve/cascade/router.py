"""One request through a cascade: ask the tiers in order, hand off below a threshold, say
which tier answered and what it cost.

    router = Router(spec, {"small": TierEndpoint(...), "big": TierEndpoint(...)})
    status, body = await router.answer(request_body, chat=True)

Threshold routing (`CascadeSpec.routing.kind == "threshold"`): tier i is asked the client's
request with its own model name and, for a log-probability signal, `logprobs` (chat:
`logprobs: true, top_logprobs: 2`; completions: `logprobs: 2`, or more when the client asked
for more); its answer's confidence (`tuneloop.client.confidence`: mean token log-probability
or smallest top-two margin; calibrated by the tier's isotonic map, if any) is compared with
its threshold: at or above, its answer is returned; below, the request goes to tier i + 1.
The last tier answers whatever it says. `agreement` asks the tier `k` samples at its
`temperature` at once (seeds `seed`, `seed + 1`, …) and keeps the first when the share of
samples that say what it says reaches the threshold. This is the rule
`tuneloop.stats.cascade.compose` applies to logged answers, so a greedy cascade served here
gives per item the answer composition predicted (tests/cascade/test_serving.py checks it).

Rule routing asks only the tier the first matching rule names (`tuneloop.cascade_spec`), without
confidences.

The answer is the answering tier's own body (its `usage`, its `id`), with `model` set to the
cascade's name, `logprobs` removed unless the client asked for them, and the trace
(`tuneloop.tiers.CascadeTrace`) under `tuneloop_cascade`. A tier that cannot be reached, or
answers 5xx, 401, 403 or 404, or answers without the logprobs its signal needs, is the
cascade's failure, not the client's: 502 naming the tier (an eval retries it and never scores
it). A tier's other 4xx (a request it refuses) is passed back with its status, the tier named.
`n` > 1 is refused (400): the confidence is one answer's.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from tuneloop.cascade_spec import CascadeSpec, Rule, TierSpec
from tuneloop.client.completions import MalformedResponse, parse_response
from tuneloop.client.confidence import answer_confidence, signal_value
from tuneloop.serve.api_error import ApiError
from tuneloop.tiers import CASCADE_FIELD, CascadeTrace, TierStep

TIER_DOWN = frozenset({401, 403, 404})
"""A tier's answers that mean the cascade is misconfigured (its key, URL or model name)."""


@dataclass(frozen=True)
class TierEndpoint:
    """Where one tier is served."""

    base_url: str
    """Its `/v1` base."""
    model: str
    """The model name requests to it carry."""
    api_key: str | None = None


@dataclass(frozen=True)
class _Asked:
    body: dict[str, Any]
    step: TierStep


class Router:
    """A cascade's routing over live tier endpoints (module docstring)."""

    def __init__(
        self,
        spec: CascadeSpec,
        endpoints: Mapping[str, TierEndpoint],
        *,
        timeout_s: float = 600.0,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.spec = spec
        self.endpoints = dict(endpoints)
        missing = [t.name for t in spec.tiers if t.name not in self.endpoints]
        if missing:
            raise ValueError(f"no endpoint for tiers {missing}")
        limits = httpx.Limits(max_connections=256, max_keepalive_connections=64)
        self.client = client or httpx.AsyncClient(timeout=timeout_s, limits=limits)

    async def aclose(self) -> None:
        await self.client.aclose()

    async def check(self) -> str | None:
        """One answer from every tier that hands off on log-probabilities, asked for them:
        what is wrong (one line naming the tier and the server option), or None."""
        if self.spec.routing.kind != "threshold":
            return None
        probe = {"messages": [{"role": "user", "content": "1+1="}], "max_tokens": 2}
        for tier in self.spec.tiers[:-1]:
            if tier.signal in ("mean_logprob", "min_margin"):
                try:
                    await self._logprob(tier, {**probe, "temperature": 0}, chat=True)
                except ApiError as err:
                    return err.message
        return None

    async def answer(self, request: dict[str, Any], *, chat: bool) -> tuple[int, dict[str, Any]]:
        """(HTTP status, response body) for one client request."""
        try:
            if request.get("n", 1) not in (1, None):
                raise ApiError("a cascade answers one choice per request (n = 1)", param="n")
            body, trace = await self._route(request, chat)
        except ApiError as err:
            return err.status, err.body()
        out = dict(body)
        out["model"] = self.spec.name
        if not request.get("logprobs"):
            out["choices"] = [
                {k: v for k, v in c.items() if k != "logprobs"} if isinstance(c, dict) else c
                for c in out.get("choices", [])
            ]
        out[CASCADE_FIELD] = trace.model_dump(mode="json")
        return 200, out

    async def _route(
        self, request: dict[str, Any], chat: bool
    ) -> tuple[dict[str, Any], CascadeTrace]:
        if self.spec.routing.kind == "rules":
            tier, route = self._ruled(request)
            asked = await self._plain(tier, request, chat)
            return asked.body, _trace([asked.step], route)
        steps: list[TierStep] = []
        last = len(self.spec.tiers) - 1
        for i, tier in enumerate(self.spec.tiers):
            if i == last:
                asked = await self._plain(tier, request, chat)
            elif tier.signal == "agreement":
                asked = await self._agreement(tier, request, chat)
            else:
                asked = await self._logprob(tier, request, chat)
            steps.append(asked.step)
            if asked.step.kept:
                return asked.body, _trace(steps, "threshold")
        raise AssertionError("the last tier always keeps")

    # ---- one tier ----------------------------------------------------------------------

    async def _plain(self, tier: TierSpec, request: dict[str, Any], chat: bool) -> _Asked:
        body, latency = await self._post(tier, request, chat)
        tokens = _completion_tokens(body)
        return _Asked(body, _step(tier, None, None, True, latency, tokens))

    async def _logprob(self, tier: TierSpec, request: dict[str, Any], chat: bool) -> _Asked:
        asked = dict(request)
        if chat:
            asked["logprobs"] = True
            asked["top_logprobs"] = max(2, int(request.get("top_logprobs") or 0))
        else:
            asked["logprobs"] = max(2, int(request.get("logprobs") or 0))
        body, latency = await self._post(tier, asked, chat)
        try:
            done = parse_response(json.dumps(body).encode(), latency, chat=chat)
            if done.logprobs is None:
                raise MalformedResponse("none were returned")
            confidence = answer_confidence(done)
        except MalformedResponse as err:
            raise ApiError(
                f"cascade tier {tier.name!r} hands off on {tier.signal} but its answer has no "
                f"usable logprobs ({err}); serve it where logprobs are returned (the embedded "
                "server does; vLLM needs --max-logprobs of at least 2)",
                status=502,
                type="upstream_error",
                code="tier_without_logprobs",
            ) from None
        assert tier.signal is not None
        raw = signal_value(confidence, tier.signal)
        return _Asked(body, self._judged(tier, raw, latency, _completion_tokens(body)))

    async def _agreement(self, tier: TierSpec, request: dict[str, Any], chat: bool) -> _Asked:
        seed = int(request.get("seed") or 0)
        started = time.perf_counter()
        answers = await asyncio.gather(  # the k samples at once: the tier batches them
            *(
                self._post(
                    tier, {**request, "temperature": tier.temperature, "seed": seed + j}, chat
                )
                for j in range(tier.k)
            )
        )
        latency = time.perf_counter() - started
        bodies = [body for body, _ in answers]
        tokens = sum(_completion_tokens(b) or 0 for b in bodies)
        said = [_text(b, chat) for b in bodies]
        raw = said.count(said[0]) / len(said)
        return _Asked(bodies[0], self._judged(tier, raw, latency, tokens))

    def _judged(self, tier: TierSpec, raw: float, latency: float, tokens: int | None) -> TierStep:
        value = raw
        if tier.calibration is not None:
            value = tier.calibration.apply(raw)
        assert tier.threshold is not None
        kept = value >= tier.threshold
        step = _step(tier, value, tier.threshold, kept, latency, tokens)
        if tier.calibration is not None:
            step = step.model_copy(update={"raw": raw})
        return step

    async def _post(
        self, tier: TierSpec, request: dict[str, Any], chat: bool
    ) -> tuple[dict[str, Any], float]:
        where = self.endpoints[tier.name]
        url = f"{where.base_url}/{'chat/completions' if chat else 'completions'}"
        payload = {**request, "model": where.model, "stream": False}
        payload.pop("stream_options", None)
        headers = {"Authorization": f"Bearer {where.api_key}"} if where.api_key else {}
        started = time.perf_counter()
        try:
            r = await self.client.post(url, json=payload, headers=headers)
        except httpx.HTTPError as err:
            what = f"is unreachable at {where.base_url}: {type(err).__name__}"
            raise _tier_down(tier, what) from None
        latency = time.perf_counter() - started
        if r.status_code >= 500 or r.status_code in TIER_DOWN:
            raise _tier_down(tier, f"answered HTTP {r.status_code}: {r.text[:200]}")
        if r.status_code != 200:
            message = _error_message(r) or r.text[:200]
            raise ApiError(f"cascade tier {tier.name!r}: {message}", status=r.status_code)
        try:
            body = r.json()
            if not isinstance(body, dict):
                raise ValueError("not an object")
        except ValueError:
            raise _tier_down(tier, "answered 200 with a body that is not a JSON object") from None
        return body, latency

    def _ruled(self, request: dict[str, Any]) -> tuple[TierSpec, str]:
        text = _request_text(request)
        metadata = request.get("metadata")
        tag = metadata.get("tag") if isinstance(metadata, dict) else None
        for n, rule in enumerate(self.spec.routing.rules, start=1):
            if _matches(rule, text, tag):
                return self.spec.tier(rule.tier), f"rule {n}"
        assert self.spec.routing.default is not None
        return self.spec.tier(self.spec.routing.default), "default"


def _matches(rule: Rule, text: str, tag: Any) -> bool:
    if rule.max_chars is not None and len(text) > rule.max_chars:
        return False
    if rule.min_chars is not None and len(text) < rule.min_chars:
        return False
    lowered = text.lower()
    if rule.keywords and not any(k.lower() in lowered for k in rule.keywords):
        return False
    return not rule.tags or tag in rule.tags


def _request_text(request: dict[str, Any]) -> str:
    """The text a rule looks at: the prompt, or every message's text content."""
    prompt = request.get("prompt")
    if isinstance(prompt, str):
        return prompt
    parts: list[str] = []
    for message in request.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts += [p["text"] for p in content if isinstance(p, dict) and "text" in p]
    return "\n".join(str(p) for p in parts)


def _text(body: dict[str, Any], chat: bool) -> str:
    try:
        choice = body["choices"][0]
        text = choice["message"]["content"] if chat else choice["text"]
    except (KeyError, IndexError, TypeError):
        return ""
    return text.strip() if isinstance(text, str) else ""


def _completion_tokens(body: dict[str, Any]) -> int | None:
    usage = body.get("usage")
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    return tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None


def _step(
    tier: TierSpec,
    confidence: float | None,
    threshold: float | None,
    kept: bool,
    latency: float,
    tokens: int | None,
) -> TierStep:
    return TierStep(
        name=tier.name,
        signal=tier.signal if confidence is not None else None,
        confidence=confidence,
        threshold=threshold,
        kept=kept,
        latency_s=round(latency, 6),
        completion_tokens=tokens,
        cost_usd=(tokens or 0) * tier.usd_per_1m / 1e6,
    )


def _trace(steps: list[TierStep], route: str) -> CascadeTrace:
    kept = next(s for s in steps if s.kept)
    return CascadeTrace(
        tier=kept.name, cost_usd=sum(s.cost_usd for s in steps), route=route, steps=steps
    )


def _tier_down(tier: TierSpec, what: str) -> ApiError:
    return ApiError(
        f"cascade tier {tier.name!r} {what}", status=502, type="upstream_error", code="tier_down"
    )


def _error_message(r: httpx.Response) -> str | None:
    try:
        error = r.json().get("error")
        return str(error.get("message")) if isinstance(error, dict) else None
    except (ValueError, AttributeError):
        return None
