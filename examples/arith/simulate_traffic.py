"""Play the users of the served arithmetic model: questions whose wording drifts, answers checked,
thumbs sent back. Bounded, loopback only, deterministic given the seed.

Run against a server or a logging proxy on this machine (anything OpenAI-compatible):

    tuneloop serve examples/arith/model --port 8000 --served-model-name arith &
    python examples/arith/simulate_traffic.py --base-url http://127.0.0.1:8000/v1 \\
        --model arith -n 300 --seed 7 [--max-seconds 120] [--feedback-rate 0.5]

or without any server, writing a scripted traffic log (the format `tuneloop.serve.traffic.log`
writes: one `{timestamp, request, response}` line per exchange, then a `{"type": "feedback",
...}` line for each rated one; answers right with probability 1 - `--error-rate`):

    python examples/arith/simulate_traffic.py --dry-run --out traffic.jsonl -n 300 --seed 7

Library: `simulate(base_url, model, n, seed, ...) -> SimResult` and
`dry_run(out, n, seed, ...) -> SimResult`; `plan(n, seed, ...)` is the pure request schedule
(`traffic_schedule.py`, which also documents the drift schedule: three phases moving from the
suite's common wordings to longer `chatty` requests and `story` word problems).

Each request is one user question (`openai` client, `/chat/completions`) tagged
`metadata: {"tag": <style>}`, checked with the `numeric` scorer (the one the suite uses), and,
for a `--feedback-rate` fraction of requests decided in advance, rated with
`POST {base_url}/feedback` `{"completion_id", "verdict": "up"|"down", "correction"}` (the
correction only on a wrong answer). A 404 there (a server without feedback) is counted, not
fatal; a failed request is counted (by error in `SimResult.errors`) and never rated.

Bounds: stops after `n` requests or `--max-seconds` (no new request starts after the deadline;
those in flight finish within `--timeout`, one retry), whichever comes first. The questions,
their order, the users and which requests are rated depend only on the seed; what the model
answers does not change them. Deliberately, it refuses any URL whose host is not 127.0.0.1 or
localhost, and its HTTP clients ignore proxy environment variables.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # sibling scripts, also when imported by the tests

import make_flywheel_suite as mfs  # noqa: E402
from traffic_schedule import (  # noqa: E402
    PHASES,
    Ask,
    Phase,
    PhaseStats,
    SimResult,
    check_loopback,
    feedback_body,
    is_correct,
    plan,
    record,
    suite_facts,
)

__all__ = [
    "PHASES",
    "Ask",
    "Live",
    "Phase",
    "PhaseStats",
    "SimResult",
    "check_loopback",
    "dry_run",
    "plan",
    "simulate",
    "simulate_async",
    "suite_facts",
    "with_error_rate",
]

T0 = 1_790_000_000
"""Default time of a dry-run log's first request (unix seconds, 2026-09-21T14:13:20Z); one
request every `DRY_RUN_SPACING_S` seconds after it, its feedback one second later."""
DRY_RUN_SPACING_S = 2


# ---- live traffic ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Live:
    """How to reach the server and how users ask (one object so the coroutines stay small)."""

    base_url: str
    model: str
    api_key: str = "not-needed"
    max_tokens: int = 8
    temperature: float = 0.0
    timeout: float = 30.0
    concurrency: int = 4
    interval: float = 0.0
    """Seconds between request starts (0: as fast as `concurrency` allows)."""

    def __post_init__(self) -> None:
        check_loopback(self.base_url)
        if self.concurrency < 1 or self.timeout <= 0 or self.interval < 0:
            raise ValueError("need concurrency >= 1, timeout > 0 and interval >= 0")


async def _ask(ask: Ask, live: Live, client: Any, http: Any, result: SimResult) -> None:
    import openai

    try:
        response = await client.chat.completions.create(
            model=live.model,
            messages=[{"role": "user", "content": ask.prompt}],
            max_tokens=live.max_tokens,
            temperature=live.temperature,
            metadata={"tag": ask.style},
            user=ask.user,
        )
        completion = response.choices[0].message.content or ""
    except (openai.APIError, IndexError) as err:
        status = getattr(err, "status_code", None)
        result.errors[type(err).__name__ + (f" {status}" if status else "")] += 1
        record(result, ask, None)
        return
    correct = is_correct(ask.question.answer, completion)
    record(result, ask, correct)
    if ask.rate:
        await _send_feedback(
            http, live, feedback_body(response.id, ask.question.answer, correct), result
        )


async def _send_feedback(http: Any, live: Live, body: dict[str, str], result: SimResult) -> None:
    import httpx

    try:
        reply = await http.post(
            live.base_url.rstrip("/") + "/feedback",
            json=body,
            headers={"Authorization": f"Bearer {live.api_key}"},
        )
    except httpx.HTTPError:
        result.feedback_failed += 1
        return
    if reply.status_code == 404:
        result.feedback_not_found += 1
    elif reply.is_success:
        result.feedback_sent += 1
    else:
        result.feedback_failed += 1


async def simulate_async(asks: list[Ask], live: Live, max_seconds: float | None) -> SimResult:
    """Run the scheduled requests against `live.base_url` (loopback only)."""
    import httpx
    import openai

    check_loopback(live.base_url)
    result = SimResult()
    start = time.monotonic()
    deadline = None if max_seconds is None else start + max_seconds
    gate = asyncio.Semaphore(live.concurrency)
    # trust_env=False: no proxy from the environment may carry traffic off this machine
    async with (
        httpx.AsyncClient(timeout=live.timeout, trust_env=False) as http,
        openai.AsyncOpenAI(
            base_url=live.base_url,
            api_key=live.api_key,
            timeout=live.timeout,
            max_retries=1,
            http_client=openai.DefaultAsyncHttpxClient(timeout=live.timeout, trust_env=False),
        ) as client,
    ):

        async def one(ask: Ask) -> None:
            try:
                await _ask(ask, live, client, http, result)
            finally:
                gate.release()

        tasks = []
        stop = _stop_on_sigterm()
        for ask in asks:
            await gate.acquire()
            if deadline is not None and time.monotonic() >= deadline:
                gate.release()
                result.stopped_by = "time"
                break
            if stop.is_set():
                gate.release()
                result.stopped_by = "signal"
                break
            tasks.append(asyncio.create_task(one(ask)))
            if live.interval:
                await asyncio.sleep(live.interval)
        await asyncio.gather(*tasks)
    result.seconds = time.monotonic() - start
    return result


def _stop_on_sigterm() -> asyncio.Event:
    """An event set by SIGTERM: the run stops starting requests and lets those in flight
    finish, so the result (and `--result`) is still written (a demo stops it this way)."""
    import signal

    stop = asyncio.Event()
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    return stop


def simulate(
    base_url: str,
    model: str,
    n: int,
    seed: int,
    *,
    feedback_rate: float = 0.5,
    max_seconds: float | None = None,
    exclude: set[mfs.Fact] | None = None,
    **options: Any,
) -> SimResult:
    """Play `n` users' requests (schedule from `seed`) against an OpenAI-compatible server on
    loopback. `options` are `Live` fields (api_key, max_tokens, temperature, timeout,
    concurrency, interval). From inside a running event loop, use `simulate_async`."""
    settings = Live(base_url, model, **options)
    asks = plan(n, seed, feedback_rate, exclude)
    return asyncio.run(simulate_async(asks, settings, max_seconds))


# ---- dry run: a scripted traffic log -----------------------------------------------------------

Answerer = Callable[[Ask, random.Random], str]
"""What the scripted model answers to one request (the rng is the dry run's own)."""


def with_error_rate(error_rate: float) -> Answerer:
    """The true answer, or with probability `error_rate` a near miss (±1, ±2 or ±10)."""

    def answer(ask: Ask, rng: random.Random) -> str:
        truth = int(ask.question.answer)
        if rng.random() >= error_rate:
            return str(truth)
        miss = rng.choice([-10, -2, -1, 1, 2, 10])
        return str(truth + miss if truth + miss >= 0 else truth - miss)  # never the truth

    return answer


def iso(seconds: float) -> str:
    """Unix seconds as the traffic log writes times: ISO 8601, milliseconds, `Z`."""
    when = datetime.fromtimestamp(seconds, timezone.utc)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def exchange_line(ask: Ask, model: str, completion: str, completion_id: str, ts: float) -> dict:
    """One traffic-log exchange, as `tuneloop.serve.traffic.log` writes it."""
    return {
        "timestamp": iso(ts),
        "request": {
            "model": model,
            "messages": [{"role": "user", "content": ask.prompt}],
            "max_tokens": 8,
            "temperature": 0.0,
            "metadata": {"tag": ask.style},
            "user": ask.user,
        },
        "response": {
            "id": completion_id,
            "object": "chat.completion",
            "created": int(ts),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": completion},
                    "finish_reason": "stop",
                }
            ],
        },
    }


def dry_run(
    out: Path,
    n: int,
    seed: int,
    *,
    feedback_rate: float = 0.5,
    answer_fn: Answerer | None = None,
    error_rate: float = 0.2,
    model: str = "arith",
    exclude: set[mfs.Fact] | None = None,
    t0: float = T0,
) -> SimResult:
    """Write the traffic log of `plan(n, seed, ...)` answered by `answer_fn` (default: the true
    answer with `error_rate` mistakes), first request at unix time `t0`, to `out`;
    byte-identical for the same arguments."""
    answer_fn = answer_fn or with_error_rate(error_rate)
    rng = random.Random(f"answers:{seed}")
    result = SimResult()
    lines = []
    for ask in plan(n, seed, feedback_rate, exclude):
        ts = t0 + DRY_RUN_SPACING_S * ask.index
        completion_id = f"chatcmpl-sim{seed}-{ask.index:05d}"
        completion = answer_fn(ask, rng)
        correct = is_correct(ask.question.answer, completion)
        record(result, ask, correct)
        lines.append(exchange_line(ask, model, completion, completion_id, ts))
        if ask.rate:
            body = feedback_body(completion_id, ask.question.answer, correct)
            lines.append({"type": "feedback", **body, "timestamp": iso(ts + 1)})
            result.feedback_sent += 1
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    os.replace(tmp, out)
    return result


# ---- command line ------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--base-url", help="OpenAI-compatible base URL on loopback, e.g. http://127.0.0.1:8000/v1")
    add("--model", help="model name to request (the server's served name)")
    add("-n", "--requests", type=int, default=300, help="stop after this many requests")
    add("--seed", type=int, default=0, help="the schedule's seed")
    add("--max-seconds", type=float, default=600.0, help="stop starting requests after this")
    add("--feedback-rate", type=float, default=0.5, help="fraction of requests rated")
    add("--concurrency", type=int, default=4, help="requests in flight")
    add("--interval", type=float, default=0.0, help="seconds between request starts")
    add("--max-tokens", type=int, default=8)
    add("--temperature", type=float, default=0.0)
    add("--timeout", type=float, default=30.0, help="per-request timeout (seconds)")
    add("--api-key-env", help="environment variable holding the server's key")
    add("--dry-run", action="store_true", help="write a scripted traffic log; no server")
    add("--out", type=Path, help="with --dry-run: the traffic log to write")
    add("--error-rate", type=float, default=0.2, help="with --dry-run: share of wrong answers")
    add("--t0", type=float, default=T0, help="with --dry-run: first request time (unix s)")
    add("--result", type=Path, help="also write the result as JSON here")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not 0 <= args.feedback_rate <= 1 or args.requests < 0 or args.concurrency < 1:
        parser.error("need 0 ≤ --feedback-rate ≤ 1, -n ≥ 0 and --concurrency ≥ 1")
    if args.dry_run:
        if args.out is None:
            parser.error("--dry-run needs --out FILE")
        result = dry_run(
            args.out,
            args.requests,
            args.seed,
            feedback_rate=args.feedback_rate,
            error_rate=args.error_rate,
            t0=args.t0,
        )
    else:
        if not args.base_url or not args.model:
            parser.error("a live run needs --base-url and --model (or use --dry-run --out FILE)")
        key = os.environ.get(args.api_key_env) if args.api_key_env else "not-needed"
        if not key:
            parser.error(f"--api-key-env: ${args.api_key_env} is not set")
        try:
            live = Live(
                args.base_url,
                args.model,
                api_key=key,
                max_tokens=args.max_tokens,
                temperature=args.temperature,
                timeout=args.timeout,
                concurrency=args.concurrency,
                interval=args.interval,
            )
        except ValueError as err:
            parser.error(str(err))
        asks = plan(args.requests, args.seed, args.feedback_rate)
        result = asyncio.run(simulate_async(asks, live, args.max_seconds))
    print(result.summary())
    if args.result is not None:
        args.result.write_text(json.dumps(result.as_dict(), indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
