"""The official openai client (sync and async) against the embedded server on the real model.

One server for the module: `serving(examples/arith/model)` with bearer auth, shared by every
test here; teardown must leave no process behind.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import psutil
import pytest

from tuneloop.config import ServeConfig
from tuneloop.endpoint import Endpoint
from tuneloop.serving import serving

REAL_MODEL = Path(__file__).resolve().parents[3] / "examples" / "arith" / "model"

pytestmark = pytest.mark.skipif(
    not (REAL_MODEL / "config.json").is_file(),
    reason="examples/arith/model not built yet (examples/arith/build_model.py)",
)
QUESTION = [{"role": "user", "content": "What is 37 + 45?"}]


@pytest.fixture(scope="module")
def endpoint() -> Iterator[Endpoint]:
    os.environ["TUNELOOP_TEST_SERVE_KEY"] = "sk-serve-test"
    config = ServeConfig(
        api_key_env="TUNELOOP_TEST_SERVE_KEY", max_tokens_cap=64, startup_timeout_s=180
    )
    try:
        with serving(REAL_MODEL, config) as ep:
            yield ep
    finally:
        del os.environ["TUNELOOP_TEST_SERVE_KEY"]
    assert ep.pid is not None and not psutil.pid_exists(ep.pid)


def test_sync_client_chat_and_text_completions_with_n(endpoint: Endpoint) -> None:
    client = openai.OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key)
    chat = client.chat.completions.create(
        model=endpoint.model, messages=QUESTION, n=3, temperature=0.8, max_tokens=12, seed=3
    )
    assert len(chat.choices) == 3
    assert all(c.finish_reason in ("stop", "length") for c in chat.choices)
    assert all("<|im_end|>" not in (c.message.content or "") for c in chat.choices)
    again = client.chat.completions.create(
        model=endpoint.model, messages=QUESTION, n=3, temperature=0.8, max_tokens=12, seed=3
    )
    assert [c.message.content for c in again.choices] == [c.message.content for c in chat.choices]
    text = client.completions.create(model=endpoint.model, prompt="12 + 5 =", n=2, max_tokens=4)
    assert len(text.choices) == 2 and text.usage is not None
    assert text.usage.completion_tokens <= 8


def test_greedy_answers_stop_at_the_end_of_turn(endpoint: Endpoint) -> None:
    client = openai.OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key)
    reply = client.chat.completions.create(
        model=endpoint.model, messages=QUESTION, temperature=0, max_tokens=32
    )
    assert reply.choices[0].finish_reason == "stop"  # the trained model ends its turn


async def test_async_client_concurrent_requests(endpoint: Endpoint) -> None:
    client = openai.AsyncOpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key)
    calls = [
        client.chat.completions.create(
            model=endpoint.model,
            messages=[{"role": "user", "content": f"What is {i} + {i}?"}],
            n=2,
            max_tokens=8,
        )
        for i in range(8)
    ]
    calls.append(client.completions.create(model=endpoint.model, prompt="3 + 4 =", n=4))
    replies = await asyncio.gather(*calls)
    assert [len(r.choices) for r in replies] == [2] * 8 + [4]
    await client.close()


def test_the_key_is_required(endpoint: Endpoint) -> None:
    r = httpx.get(f"{endpoint.base_url}/models")
    assert r.status_code == 401
    assert r.json()["error"]["code"] == "invalid_api_key"


def test_streamed_answer_matches_the_plain_one(endpoint: Endpoint) -> None:
    client = openai.OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key)
    args = {"model": endpoint.model, "messages": QUESTION, "temperature": 0, "max_tokens": 32}
    plain = client.chat.completions.create(**args)  # type: ignore[call-overload]
    chunks = list(client.chat.completions.create(**args, stream=True))  # type: ignore[call-overload]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == plain.choices[0].message.content
    assert chunks[-1].choices[0].finish_reason == "stop"


@pytest.mark.parametrize(
    ("headers", "needle"),
    [
        ({"origin": "http://evil.example", "content-type": "text/plain"}, "Origin"),
        ({"host": "evil.example:8000"}, "Host"),  # DNS rebinding: the page's own name
    ],
)
def test_web_pages_of_other_sites_are_refused(
    endpoint: Endpoint, headers: dict[str, str], needle: str
) -> None:
    """A page can send a simple cross-site POST to a loopback server (or read it through DNS
    rebinding): refused before any route, even with the right key (`serve/guard.py`)."""
    body = {"model": endpoint.model, "messages": QUESTION, "max_tokens": 2}
    auth = {"authorization": f"Bearer {endpoint.api_key}"}
    url = f"{endpoint.base_url}/chat/completions"
    answer = httpx.post(url, json=body, headers={**auth, **headers}, timeout=30)
    assert answer.status_code == 403 and needle in answer.json()["error"]["message"]
    own = {**auth, "origin": f"http://{httpx.URL(url).netloc.decode()}"}
    assert httpx.post(url, json=body, headers=own, timeout=30).status_code == 200


def test_models_retrieve_and_penalties_are_answered_not_ignored(endpoint: Endpoint) -> None:
    """`client.models.retrieve(name)` was a bare 404 (no `/v1/models/{id}`), and a non-zero
    `presence_penalty` / `frequency_penalty` was silently ignored (200, no penalty applied)."""
    client = openai.OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key)
    assert client.models.retrieve(endpoint.model).id == endpoint.model
    with pytest.raises(openai.NotFoundError, match="is not served here"):
        client.models.retrieve("no-such-model")
    for penalty in ("presence_penalty", "frequency_penalty"):
        with pytest.raises(openai.BadRequestError, match=penalty):
            client.chat.completions.create(  # type: ignore[call-overload]
                model=endpoint.model, messages=QUESTION, max_tokens=2, **{penalty: 0.5}
            )
    zero = client.chat.completions.create(
        model=endpoint.model, messages=QUESTION, max_tokens=2, presence_penalty=0, logit_bias={}
    )
    assert zero.choices[0].finish_reason in ("stop", "length")
