"""A loaded judge: grade one answer, or compare two in both orders.

    judge = load_judge(Path("judge.yaml"))
    j = judge.grade(messages, response, reference="42")        # Judgement(value=1.0, …)
    p = judge.compare(messages, baseline=old, candidate=new)   # Preference(outcome="tie", …)

Each judgement is one chat request (the rendered rubric as the user message) to the judge's
OpenAI-compatible endpoint, synchronous and thread-safe: the eval calls scorers that are not
`inline` from worker threads. Transport failures (connection errors, timeouts, 408/429/5xx)
are retried with full-jitter backoff up to `max_retries` and then raise `JudgeUnavailable`;
401/403/404 raise `JudgeRefused` at once (the endpoint, key or model name is wrong). A
judgement that does not parse (`parse.py`) is asked again with a new seed up to
`parse_retries` times, then raises `JudgeUnparsable`: in an eval that is a harness error,
never a score. Parsed judgements are cached by request hash (`cache.py`), so nothing is asked
twice. Every error message is redacted (`envkeys.Redactor`).

Pairwise (Zheng et al. 2023, "Judging LLM-as-a-Judge", §3.3 position bias): the pair is
asked as (A = baseline, B = candidate) and again swapped; the candidate wins only when both
orders prefer it, loses only when both prefer the baseline, and anything else — the orders
disagree, or either says tie — is a tie. A judge that always answers "A" therefore yields
only ties: its position bias is cancelled, not averaged into the result.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from tuneloop.client import REFUSED_STATUS, RETRY_STATUS, api_base, backoff_delay
from tuneloop.envkeys import Redactor, read_api_key
from tuneloop.records.judge import JudgeIdentity
from tuneloop.scorers.judge.cache import CachedCall, JudgeCache
from tuneloop.scorers.judge.parse import Unparsable, parse_grade, parse_verdict
from tuneloop.scorers.judge.rubric import Rubric, load_rubric, prompt_text
from tuneloop.scorers.judge.spec import JudgeSpec, default_cache, load_judge_spec

if TYPE_CHECKING:
    import httpx


class JudgeError(Exception):
    """A judgement that could not be had; never a score."""


class JudgeUnparsable(JudgeError):
    """The judge's answers were not in the declared form, every time it was asked."""


class JudgeRefused(JudgeError):
    """401/403/404: the judge's endpoint, key or model name is wrong."""


class JudgeUnavailable(JudgeError):
    """Connection errors, timeouts, 429 or 5xx outlasted the retries."""


@dataclass(frozen=True)
class Judgement:
    value: float
    """The grade in [0, 1]."""
    raw: str
    """The judgement as written (its last line parsed)."""
    cost_usd: float | None
    """What the judgement cost (also when it came from the cache: what it cost to make)."""
    cached: bool
    """Read from the cache: nothing was asked this time."""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    attempts: int = 1
    """Requests this judgement took (1 + unparsable answers re-asked)."""


@dataclass(frozen=True)
class Preference:
    outcome: Literal["candidate", "baseline", "tie"]
    """Which answer the judge preferred in both orders; tie otherwise."""
    orders: tuple[str, str]
    """The verdict with A = baseline, then with A = candidate ("A", "B" or "TIE")."""
    cost_usd: float | None
    cached: bool
    """Both orders came from the cache."""

    @property
    def value(self) -> float:
        """The candidate's score: 1 win, 0.5 tie, 0 loss."""
        return {"candidate": 1.0, "tie": 0.5, "baseline": 0.0}[self.outcome]


def preference(first: str, second: str) -> Literal["candidate", "baseline", "tie"]:
    """The outcome of verdicts (A = baseline first, then A = candidate); see the docstring."""
    if first == "B" and second == "A":
        return "candidate"
    if first == "A" and second == "B":
        return "baseline"
    return "tie"


@dataclass(frozen=True)
class _Call:
    value: Any
    text: str
    cached: bool
    prompt_tokens: int | None
    completion_tokens: int | None
    attempts: int


class Judge:
    """A judge file, loaded: its spec, rubric, key, HTTP client and cache."""

    def __init__(self, spec: JudgeSpec, rubric: Rubric, cache: JudgeCache, api_key: str | None):
        self.spec = spec
        self.rubric = rubric
        self.cache = cache
        self.url = api_base(spec.endpoint) + "/chat/completions"
        self.identity = JudgeIdentity(
            model=spec.model,
            endpoint=spec.endpoint,
            mode=spec.mode,
            rubric_sha256=rubric.sha256,
            pass_threshold=spec.pass_threshold,
        )
        self._redact = Redactor((api_key,)).text
        import httpx  # here: importing the scorers (every eval, `tuneloop eval --help`) stays light

        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(headers=headers, timeout=spec.request_timeout_s)
        self._lock = threading.Lock()
        self.calls = 0
        """Requests sent to the judge by this process (cache hits excluded)."""

    def close(self) -> None:
        self._http.close()

    def grade(
        self, messages: Sequence[Mapping[str, Any]], response: str, reference: str | None = None
    ) -> Judgement:
        """The rubric's grade of `response` to the conversation `messages`."""
        content = self.rubric.grade(prompt_text(messages), response, reference or "")
        got = self._ask(content, parse_grade)
        return Judgement(
            got.value,
            got.text,
            self._cost(got),
            got.cached,
            got.prompt_tokens,
            got.completion_tokens,
            got.attempts,
        )

    def compare(
        self, messages: Sequence[Mapping[str, Any]], baseline: str, candidate: str
    ) -> Preference:
        """Which of two answers the judge prefers, asked in both orders (module docstring)."""
        prompt = prompt_text(messages)
        first = self._ask(self.rubric.pairwise(prompt, baseline, candidate), parse_verdict)
        second = self._ask(self.rubric.pairwise(prompt, candidate, baseline), parse_verdict)
        costs = [self._cost(first), self._cost(second)]
        total = None if None in costs else sum(c for c in costs if c is not None)
        return Preference(
            preference(first.value, second.value),
            (first.value, second.value),
            total,
            first.cached and second.cached,
        )

    def _cost(self, call: _Call) -> float | None:
        return self.spec.price.cost(call.prompt_tokens, call.completion_tokens)

    def _ask(self, content: str, parse: Any) -> _Call:
        """One judgement: cached, else asked (re-asked while unparsable)."""
        problems = []
        for attempt in range(self.spec.parse_retries + 1):
            payload = self._payload(content, attempt)
            key = hashlib.sha256(
                json.dumps({"url": self.url, **payload}, sort_keys=True).encode()
            ).hexdigest()
            hit = self.cache.get(key)
            if hit is not None:
                return _Call(
                    parse(hit.text),
                    hit.text,
                    True,
                    hit.prompt_tokens,
                    hit.completion_tokens,
                    attempt + 1,
                )
            text, usage = self._post(payload)
            try:
                value = parse(text)
            except Unparsable as err:
                problems.append(str(err))
                continue
            self.cache.put(key, CachedCall(text, *usage))
            return _Call(value, text, False, *usage, attempt + 1)
        raise JudgeUnparsable(
            f"judge {self.spec.model!r} gave no parsable judgement in "
            f"{self.spec.parse_retries + 1} tries: {self._redact(problems[-1])}"
        )

    def _payload(self, content: str, attempt: int) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.spec.model,
            "messages": [{"role": "user", "content": content}],
            "max_tokens": self.spec.max_tokens,
            "temperature": self.spec.temperature,
        }
        if self.spec.send_seed:
            digest = hashlib.sha256(f"{content}\0{attempt}".encode()).digest()
            payload["seed"] = int.from_bytes(digest[:4], "big") >> 1
        return payload

    def _post(self, payload: dict[str, Any]) -> tuple[str, tuple[int | None, int | None]]:
        """(judgement text, (prompt tokens, completion tokens)) of one request, retried."""
        import httpx

        error = ""
        for attempt in range(self.spec.max_retries + 1):
            if attempt:
                time.sleep(backoff_delay(attempt - 1, self.spec.backoff_s))
            with self._lock:
                self.calls += 1
            try:
                answer = self._http.post(self.url, json=payload)
            except httpx.HTTPError as err:
                error = f"{type(err).__name__}: {err}"
                continue
            if answer.status_code == 200:
                return _judgement(answer, self.spec.model)
            error = f"HTTP {answer.status_code} from {self.url}: {answer.text[:200]}"
            if answer.status_code in REFUSED_STATUS:
                raise JudgeRefused(self._redact(f"judge {self.spec.model!r}: {error}"))
            if answer.status_code not in RETRY_STATUS:
                raise JudgeUnavailable(self._redact(f"judge {self.spec.model!r}: {error}"))
        raise JudgeUnavailable(
            self._redact(
                f"judge {self.spec.model!r}: {error} (after {self.spec.max_retries} retries)"
            )
        )


def _judgement(answer: httpx.Response, model: str) -> tuple[str, tuple[int | None, int | None]]:
    """The text and usage of a 200; an unreadable body is an unparsable judgement."""
    try:
        data = answer.json()
        text = data["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        return "", (None, None)  # parsed as empty: re-asked, then JudgeUnparsable
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    counts = tuple(
        v if isinstance(v, int) and not isinstance(v, bool) else None
        for v in (usage.get("prompt_tokens"), usage.get("completion_tokens"))
    )
    return str(text or ""), (counts[0], counts[1])


def load_judge(path: Path, *, check_env: bool = True) -> Judge:
    """A judge file, loaded and checked (InputError naming the file, key and line)."""
    spec = load_judge_spec(path, check_env=check_env)
    rubric = load_rubric(spec.rubric, spec.mode)
    api_key = read_api_key(spec.api_key_env, f"{path}: api_key_env") if check_env else None
    return Judge(spec, rubric, JudgeCache(spec.cache or default_cache(path)), api_key)
