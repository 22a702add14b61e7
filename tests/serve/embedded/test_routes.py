"""The embedded app in-process (httpx ASGI transport) over the tiny random-weight model."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from tuneloop.config import ServerConfig
from tuneloop.serve.embedded.engine import Engine
from tuneloop.serve.embedded.routes import ServerSettings, create_app

NAME = "tiny"
CHAT = {"model": NAME, "messages": [{"role": "user", "content": "What is 3 + 4?"}]}


@pytest.fixture
def engine(tiny_engine: Engine) -> Engine:
    return tiny_engine


def client(engine: Engine, **settings: Any) -> httpx.AsyncClient:
    app = create_app(engine, NAME, ServerSettings(**settings))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


async def test_chat_completion_follows_the_openai_schema(engine: Engine) -> None:
    async with client(engine) as c:
        r = await c.post("/v1/chat/completions", json={**CHAT, "n": 3, "max_tokens": 6})
    assert r.status_code == 200
    body = r.json()
    assert body["object"] == "chat.completion" and body["model"] == NAME
    assert [ch["index"] for ch in body["choices"]] == [0, 1, 2]
    for ch in body["choices"]:
        assert ch["message"]["role"] == "assistant"
        assert ch["finish_reason"] in ("stop", "length")
    used = body["usage"]
    assert used["total_tokens"] == used["prompt_tokens"] + used["completion_tokens"]
    assert 3 <= used["completion_tokens"] <= 18


async def test_text_completions_are_prompt_major(engine: Engine) -> None:
    body = {"model": NAME, "prompt": ["12+3=", "7*8="], "n": 2, "max_tokens": 5, "seed": 1}
    async with client(engine) as c:
        both = (await c.post("/v1/completions", json=body)).json()
        first = (await c.post("/v1/completions", json={**body, "prompt": ["12+3="]})).json()
    texts = [ch["text"] for ch in both["choices"]]
    assert both["object"] == "text_completion" and len(texts) == 4
    # choice k is prompt k // n, sample k % n, seeded by (seed, k)
    assert [ch["text"] for ch in first["choices"]] == texts[:2]
    assert all(ch["finish_reason"] == "length" for ch in both["choices"])


async def test_seeded_requests_repeat_alone_and_when_batched(engine: Engine) -> None:
    req = {**CHAT, "n": 2, "max_tokens": 12, "temperature": 1.0, "seed": 1234}
    async with client(engine) as c:
        first = (await c.post("/v1/chat/completions", json=req)).json()["choices"]
        before = engine.batches_run
        others = [
            c.post("/v1/chat/completions", json={**CHAT, "max_tokens": 3 + i, "seed": i})
            for i in range(12)
        ]
        replies = await asyncio.gather(c.post("/v1/chat/completions", json=req), *others)
        batches = engine.batches_run - before
    texts = [ch["message"]["content"] for ch in first]
    assert [ch["message"]["content"] for ch in replies[0].json()["choices"]] == texts
    assert texts[0] != texts[1]  # samples within a request draw different streams
    assert batches < 13 / 2  # 13 concurrent requests shared batches


async def test_stop_strings_cut_the_completion(engine: Engine) -> None:
    async with client(engine) as c:
        full = (
            await c.post(
                "/v1/completions",
                json={"model": NAME, "prompt": "ab", "max_tokens": 12, "temperature": 0},
            )
        ).json()
        text = full["choices"][0]["text"]
        stop = text[4:6]
        cut = (
            await c.post(
                "/v1/completions",
                json={
                    "model": NAME,
                    "prompt": "ab",
                    "max_tokens": 12,
                    "temperature": 0,
                    "stop": [stop],
                },
            )
        ).json()
    choice = cut["choices"][0]
    assert choice["text"] == text[: text.find(stop)]
    assert choice["finish_reason"] == "stop"


@pytest.mark.parametrize(
    ("path", "payload", "status", "code"),
    [
        ("/v1/chat/completions", b"{oops", 400, "invalid_json"),
        ("/v1/chat/completions", b'{"model": "tiny", "messages": "hi"}', 400, "invalid_value"),
        ("/v1/chat/completions", b'{"model": "other", "messages": []}', 400, "invalid_value"),
        (
            "/v1/chat/completions",
            b'{"model": "other", "messages": [{"role": "user", "content": "x"}]}',
            404,
            "model_not_found",
        ),
        (
            "/v1/completions",
            b'{"model": "tiny", "prompt": "x", "max_tokens": 0}',
            400,
            "invalid_value",
        ),
        ("/v1/completions", b'{"model": "tiny", "prompt": "", "max_tokens": 3}', 400, None),
        ("/v1/completions", b'{"model": "tiny", "prompt": "x", "best_of": 2}', 400, None),
        (
            "/v1/chat/completions",
            b'{"model": "tiny", "messages": [{"role": "user", "content": "x"}], "tools": '
            b'[{"type": "function", "function": {"name": "f", "parameters": {"type": 3}}}]}',
            400,
            "invalid_value",
        ),
        ("/v1/completions", b"x" * 5000, 413, "request_too_large"),
        ("/v1/nothing", b"{}", 404, None),
    ],
)
async def test_bad_requests_get_openai_error_bodies(
    engine: Engine, path: str, payload: bytes, status: int, code: str | None
) -> None:
    async with client(engine, config=ServerConfig(max_tokens_cap=50, max_body_bytes=4096)) as c:
        r = await c.post(path, content=payload)
    assert r.status_code == status
    error = r.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == code


async def test_bearer_auth_guards_v1_but_not_health(engine: Engine) -> None:
    async with client(engine, api_key="s3cret") as c:
        assert (await c.get("/health")).status_code == 200
        assert (await c.get("/v1/models")).status_code == 401
        bad = await c.get("/v1/models", headers={"Authorization": "Bearer nope"})
        assert bad.json()["error"]["code"] == "invalid_api_key"
        ok = await c.get("/v1/models", headers={"Authorization": "Bearer s3cret"})
    assert ok.json()["data"][0]["id"] == NAME


async def test_completions_are_clamped_to_the_context_and_overlong_prompts_refused(
    engine: Engine,
) -> None:
    assert engine.context == 1024
    async with client(engine) as c:
        near = await c.post(
            "/v1/completions",
            json={"model": NAME, "prompt": "1" * 1021, "max_tokens": 10, "temperature": 0},
        )
        over = await c.post("/v1/completions", json={"model": NAME, "prompt": "1" * 1024})
    assert near.json()["usage"]["completion_tokens"] == 3
    assert near.json()["choices"][0]["finish_reason"] == "length"
    assert over.status_code == 400
    assert over.json()["error"]["code"] == "context_length_exceeded"


async def test_token_id_prompts_answer_as_their_text_does(engine: Engine) -> None:
    """lm-eval's `local-completions` sends token ids by default."""
    ids = engine.text_prompt("12+3=")
    body = {"model": NAME, "max_tokens": 5, "temperature": 0}
    async with client(engine) as c:
        text = (await c.post("/v1/completions", json={**body, "prompt": "12+3="})).json()
        one = (await c.post("/v1/completions", json={**body, "prompt": ids})).json()
        two = (await c.post("/v1/completions", json={**body, "prompt": [ids, ids]})).json()
        bad = await c.post("/v1/completions", json={**body, "prompt": [engine.vocab_size]})
    assert [ch["text"] for ch in one["choices"]] == [text["choices"][0]["text"]]
    assert [ch["text"] for ch in two["choices"]] == [text["choices"][0]["text"]] * 2
    assert one["usage"]["prompt_tokens"] == len(ids)
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "prompt"


async def test_max_tokens_above_the_cap_is_clamped_and_says_so(engine: Engine) -> None:
    async with client(engine, config=ServerConfig(max_tokens_cap=4)) as c:
        over = await c.post("/v1/completions", json={"model": NAME, "prompt": "1", "max_tokens": 9})
        within = await c.post(
            "/v1/completions", json={"model": NAME, "prompt": "1", "max_tokens": 3}
        )
        streamed = await c.post(
            "/v1/chat/completions", json={**CHAT, "max_tokens": 50, "stream": True}
        )
    assert over.status_code == 200 and over.headers["x-tuneloop-max-tokens"] == "4"
    assert over.json()["usage"]["completion_tokens"] <= 4
    assert "x-tuneloop-max-tokens" not in within.headers
    assert streamed.headers["x-tuneloop-max-tokens"] == "4"


async def test_a_context_overflow_speaks_openais_words(engine: Engine) -> None:
    """LangChain and litellm recognise an overflow by OpenAI's message, not only its code."""
    async with client(engine) as c:
        over = await c.post("/v1/completions", json={"model": NAME, "prompt": "1" * 1024})
    error = over.json()["error"]
    assert error["code"] == "context_length_exceeded" and error["param"] == "prompt"
    assert error["message"].startswith("This model's maximum context length is 1024 tokens.")


async def test_one_model_is_retrieved_by_its_id(engine: Engine) -> None:
    async with client(engine) as c:
        found = await c.get(f"/v1/models/{NAME}")
        missing = await c.get("/v1/models/other")
    assert found.json()["id"] == NAME
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"


def test_the_served_name_defaults_to_the_folders_name(tmp_path: Path) -> None:
    assert ServerSettings().name_for(tmp_path / "arith" / "model") == "model"
    assert ServerSettings().name_for("examples/arith/model/") == "model"
    assert ServerSettings(served_model_name="x").name_for(tmp_path) == "x"
