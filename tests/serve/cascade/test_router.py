"""The cascade server over stub tiers: hand-off by threshold, calibration, agreement, rules,
the trace, streaming, a tier down or without logprobs, and the hand-off under load."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.serve.cascade.stub_tiers import descriptor, tier_app
from tests.serve.upstreams import running
from tuneloop.cascade_spec import read_cascade
from tuneloop.errors import InputError
from tuneloop.evaluate import EvalSettings, evaluate
from tuneloop.samplelog import load_sample_log
from tuneloop.serve.cascade.app import create_cascade_app
from tuneloop.serve.cascade.router import Router, TierEndpoint
from tuneloop.serve.lifecycle import free_port
from tuneloop.tiers import CASCADE_FIELD, TIER_HEADER, CascadeTrace


def sure_when_short(prompt: str, request: dict[str, Any]) -> tuple[str, float]:
    """The small tier is sure (logprob -0.1) of prompts under 10 characters, unsure (-2.0)
    of the rest; it answers `small:<prompt>`."""
    return f"small:{prompt}", -0.1 if len(prompt) < 10 else -2.0


def big(prompt: str, request: dict[str, Any]) -> tuple[str, float]:
    return f"big:{prompt}", -0.01


@contextmanager
def cascade(
    small_changes: dict[str, Any] | None = None,
    *,
    routing: dict[str, Any] | None = None,
    small: Any = sure_when_short,
    small_logprobs: bool = True,
    big_up: bool = True,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """A cascade server over two stub tiers, in threads (the small tier's descriptor entry
    changed by `small_changes`); yields (its /v1 URL, the tier apps)."""
    with ExitStack() as stack:
        apps = {"small": tier_app("small", small, logprobs=small_logprobs)}
        urls = {"small": stack.enter_context(running(apps["small"]))}
        if big_up:
            apps["big"] = tier_app("big", big)
            urls["big"] = stack.enter_context(running(apps["big"]))
        else:
            urls["big"] = f"http://127.0.0.1:{free_port('127.0.0.1')}"  # nothing listens
        raw = descriptor(urls)
        raw["components"][0] |= small_changes or {}
        if routing is not None:
            raw["routing"] = routing
        spec = read_cascade(raw, "test")
        endpoints = {t.name: TierEndpoint(f"{t.endpoint}/v1", str(t.model)) for t in spec.tiers}
        url = stack.enter_context(running(create_cascade_app(Router(spec, endpoints))))
        yield f"{url}/v1", apps


def ask(url: str, content: str, **extra: Any) -> httpx.Response:
    body = {"model": "stub-cascade", "messages": [{"role": "user", "content": content}], **extra}
    return httpx.post(f"{url}/chat/completions", json=body, timeout=30)


def test_a_sure_tier_keeps_and_an_unsure_one_hands_off_with_the_trace() -> None:
    with cascade() as (url, apps):
        kept, handed = ask(url, "2+2"), ask(url, "a long question here")
    assert kept.status_code == handed.status_code == 200
    assert kept.json()["choices"][0]["message"]["content"] == "small:2+2"
    assert kept.headers[TIER_HEADER] == "small"
    assert handed.json()["choices"][0]["message"]["content"] == "big:a long question here"
    assert handed.headers[TIER_HEADER] == "big"
    trace = CascadeTrace.model_validate(handed.json()[CASCADE_FIELD])
    assert [s.name for s in trace.steps] == ["small", "big"]
    first = trace.steps[0]
    assert (first.signal, first.confidence, first.threshold, first.kept) == (
        "mean_logprob",
        -2.0,
        -0.5,
        False,
    )
    # two completion tokens at each tier: 2 × $1 + 2 × $10 per million
    assert trace.cost_usd == pytest.approx(22e-6)
    assert trace.steps[1].confidence is None and trace.steps[1].kept
    # the client did not ask for logprobs: they are not passed on; the model is the cascade's
    assert "logprobs" not in kept.json()["choices"][0]
    assert kept.json()["model"] == "stub-cascade"
    # the small tier was asked with logprobs and its own model name, the big one without
    small_seen = apps["small"].state.seen[0]
    assert small_seen["logprobs"] is True and small_seen["top_logprobs"] == 2
    assert small_seen["model"] == "small-1"
    assert "logprobs" not in apps["big"].state.seen[0]


def test_a_calibration_map_turns_the_signal_into_a_probability_first() -> None:
    calibrated = {"calibration": {"x": [-2.0, -0.1], "y": [0.2, 0.9]}, "threshold": 0.5}
    with cascade(calibrated) as (url, _):
        r = ask(url, "2+2")
    step = r.json()[CASCADE_FIELD]["steps"][0]
    assert step["raw"] == pytest.approx(-0.1) and step["confidence"] == pytest.approx(0.9)
    assert step["kept"] is True


def test_agreement_keeps_when_enough_samples_say_the_same() -> None:
    def wavering(prompt: str, request: dict[str, Any]) -> tuple[str, float]:
        # short prompts: the same answer at every seed; others: a different one each time
        return (f"s:{prompt}" if len(prompt) < 10 else f"s:{request['seed']}"), -1.0

    agreement = {"signal": "agreement", "threshold": 0.6, "k": 3}
    with cascade(agreement, small=wavering) as (url, _):
        sure, unsure = ask(url, "2+2", seed=7), ask(url, "long question x")
    assert sure.headers[TIER_HEADER] == "small"
    assert sure.json()[CASCADE_FIELD]["steps"][0]["confidence"] == 1.0
    assert sure.json()[CASCADE_FIELD]["steps"][0]["completion_tokens"] == 6  # 3 samples × 2
    assert unsure.headers[TIER_HEADER] == "big"
    assert unsure.json()[CASCADE_FIELD]["steps"][0]["confidence"] == pytest.approx(1 / 3)


def test_a_rule_router_sends_each_request_to_its_tier_without_confidences() -> None:
    routing = {
        "kind": "rules",
        "rules": [
            {"tier": "big", "keywords": ["PROVE"]},
            {"tier": "small", "max_chars": 20},
        ],
        "default": "big",
    }
    with cascade(routing=routing) as (url, apps):
        keyword, short, long_ = ask(url, "prove 1+1"), ask(url, "2+2"), ask(url, "x" * 30)
    assert (keyword.headers[TIER_HEADER], keyword.json()[CASCADE_FIELD]["route"]) == (
        "big",
        "rule 1",
    )
    assert (short.headers[TIER_HEADER], short.json()[CASCADE_FIELD]["route"]) == ("small", "rule 2")
    assert (long_.headers[TIER_HEADER], long_.json()[CASCADE_FIELD]["route"]) == ("big", "default")
    assert all("logprobs" not in body for body in apps["small"].state.seen)


def test_a_streamed_request_gets_the_answer_and_the_trace_as_chunks() -> None:
    with cascade() as (url, _):
        r = ask(url, "2+2", stream=True, stream_options={"include_usage": True})
    events = [line[6:] for line in r.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["content"] == "small:2+2"
    assert chunks[1]["choices"][0]["finish_reason"] == "stop"
    assert chunks[1][CASCADE_FIELD]["tier"] == "small"
    assert chunks[2]["usage"]["completion_tokens"] == 2
    assert r.headers[TIER_HEADER] == "small"


def test_a_tier_that_is_down_is_a_502_naming_it_and_an_eval_never_scores_it(
    tmp_path: Path,
) -> None:
    suite = tmp_path / "suite.jsonl"
    items = [("short", "2+2"), ("long", "a long question here")]
    suite.write_text(
        "".join(
            json.dumps({"id": i, "messages": [{"role": "user", "content": q}], "answer": "x"})
            + "\n"
            for i, q in items
        )
    )
    with cascade(big_up=False) as (url, _):
        r = ask(url, "a long question here")
        settings = EvalSettings(n_samples=1, temperature=0.0, max_tokens=8, max_retries=1)
        settings = settings.model_copy(update={"backoff_s": 0.01})
        evaluate(url, "stub-cascade", suite, tmp_path / "eval", settings, progress=False)
    assert r.status_code == 502
    assert "cascade tier 'big'" in r.json()["error"]["message"]
    summary, rows = load_sample_log(tmp_path / "eval")
    by_id = {row.item_id: row for row in rows}
    assert by_id["short"].status == "ok" and by_id["short"].cascade is not None
    assert by_id["long"].status == "missing" and by_id["long"].score is None
    assert "cascade tier 'big'" in (by_id["long"].error or "")


def test_a_tier_without_logprobs_is_named_at_start_and_per_request() -> None:
    with cascade(small_logprobs=False) as (url, _):
        r = ask(url, "2+2")
    assert r.status_code == 502
    message = r.json()["error"]["message"]
    assert "cascade tier 'small'" in message and "logprobs" in message
    assert "--max-logprobs" in message
    spec = read_cascade(descriptor({"small": "http://a", "big": "http://b"}), "test")
    with running(tier_app("small", sure_when_short, logprobs=False)) as small_url:
        eps = {
            "small": TierEndpoint(f"{small_url}/v1", "small-1"),
            "big": TierEndpoint("http://127.0.0.1:9/v1", "big-1"),
        }
        problem = asyncio.run(Router(spec, eps).check())
    assert problem is not None and problem.startswith("cascade tier 'small' hands off")


def test_more_than_one_choice_is_refused() -> None:
    with cascade() as (url, _):
        r = ask(url, "2+2", n=2)
    assert r.status_code == 400 and r.json()["error"]["param"] == "n"


def test_the_hand_off_under_load_fails_no_request_and_records_every_tier() -> None:
    n = 200

    async def hammer(url: str) -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=64)
        async with httpx.AsyncClient(timeout=60, limits=limits) as client:
            gate = asyncio.Semaphore(64)

            async def one(i: int) -> httpx.Response:
                content = "2+2" if i % 3 else f"question number {i} here"
                body = {"model": "m", "messages": [{"role": "user", "content": content}]}
                async with gate:
                    return await client.post(f"{url}/chat/completions", json=body)

            return await asyncio.gather(*(one(i) for i in range(n)))

    with cascade() as (url, _):
        answers = asyncio.run(hammer(url))
    assert [r.status_code for r in answers].count(200) == n
    tiers = [r.headers[TIER_HEADER] for r in answers]
    assert all(r.json()[CASCADE_FIELD]["tier"] == t for r, t in zip(answers, tiers, strict=True))
    assert tiers.count("big") == len(range(0, n, 3))  # every third was handed off


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"threshold": 0.5}, "threshold 0.5 is outside mean_logprob's range [-inf, 0]"),
        ({"signal": "min_margin", "threshold": -1}, "outside min_margin's range [0, inf]"),
        ({"signal": "agreement", "threshold": 2}, "outside agreement's range [0, 1]"),
        ({"signal": None}, "every tier but the last needs 'signal'"),
        ({"endpoint": None}, "give either 'path' (a model folder) or 'endpoint'"),
        ({"usd_per_1m": -1}, "usd_per_1m: Input should be greater than or equal to 0"),
        ({"calibration": {"x": [0, -1], "y": [0.1, 0.2]}}, "x must be sorted"),
    ],
)
def test_a_bad_tier_is_refused_in_one_line_naming_it(change: dict[str, Any], message: str) -> None:
    raw = descriptor({"small": "http://a", "big": "http://b"})
    raw["components"][0] |= change
    with pytest.raises(InputError, match="tier 'small'") as err:
        read_cascade(raw, "cascade.json")
    assert message in str(err.value) and "\n" not in str(err.value)
