"""Shadow mirroring (`serve/proxy/mirror.py`): a bounded load test with a slow or failing
challenger (0 failed user requests, the challenger's answers never served), the busy skip,
streaming, the sample, scrubbing, and the refusal of a challenger elsewhere."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from tuneloop.errors import InputError
from tuneloop.records import read_record
from tuneloop.records.shadow import ShadowPair, ShadowState
from tuneloop.serve.proxy import (
    Mirror,
    Proxy,
    ProxySettings,
    ShadowSettings,
    check_shadow,
    create_proxy_app,
)
from tuneloop.serve.proxy.mirror import in_sample, shadow_auth
from tuneloop.serve.traffic import TrafficLog

from ...installed import proxy_process, tuneloop
from ..upstreams import fake_upstream, running


def chat(text: str, model: str = "champion", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": text}], **extra}


def shadow(url: str, tmp_path: Path, **extra: Any) -> ShadowSettings:
    settings: dict[str, Any] = {"fraction": 1.0, "concurrency": 4, **extra}
    return ShadowSettings(url=url, model="chal-v2", log_dir=tmp_path, **settings)


def pairs(tmp_path: Path) -> list[ShadowPair]:
    path = tmp_path / "shadow" / "pairs.jsonl"
    if not path.exists():
        return []
    return [ShadowPair.model_validate(json.loads(line)) for line in path.read_text().splitlines()]


class Gauge:
    """A challenger that counts how many of its requests are in flight at once."""

    def __init__(self, delay_s: float = 0.0, status: int = 200) -> None:
        self.now = 0
        self.peak = 0
        self.seen: list[dict[str, Any]] = []
        self.release = threading.Event()  # set from the test's thread
        self.hold = False
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def answer(request: Request) -> JSONResponse:
            body = await request.json()
            self.seen.append(body)
            self.now += 1
            self.peak = max(self.peak, self.now)
            try:
                while self.hold and not self.release.is_set():
                    await asyncio.sleep(0.01)
                await asyncio.sleep(delay_s)
            finally:
                self.now -= 1
            if status != 200:
                return JSONResponse({"error": {"message": "down"}}, status_code=status)
            text = f"challenger: {body['messages'][-1]['content']}"
            message = {"role": "assistant", "content": text}
            return JSONResponse(
                {
                    "id": "chatcmpl-chal",
                    "object": "chat.completion",
                    "model": body["model"],
                    "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 4, "completion_tokens": 3},
                }
            )

        self.app = app


async def load(base: str, total: int, concurrency: int, **extra: Any) -> list[httpx.Response]:
    todo = iter(range(total))
    replies: list[httpx.Response] = []
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:

        async def worker() -> None:
            for i in todo:
                replies.append(await client.post("/v1/chat/completions", json=chat(f"q{i}")))

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return replies


@pytest.mark.parametrize("status", [200, 500])
async def test_load_with_a_slow_or_failing_challenger_fails_no_user_request(
    tmp_path: Path, status: int
) -> None:
    total, users, slots = 240, 16, 4
    gauge = Gauge(delay_s=0.05, status=status)
    log = TrafficLog(tmp_path)
    with running(fake_upstream("champion")) as champ, running(gauge.app) as chal:
        proxy = Proxy(ProxySettings(upstream=champ), Mirror(shadow(chal, tmp_path)))
        with running(create_proxy_app(proxy, log)) as base:
            replies = await load(base, total, users)
            health = httpx.get(f"{base}/health").json()["shadow"]
    assert [r.status_code for r in replies] == [200] * total  # 0 failed user requests
    texts = {r.json()["choices"][0]["message"]["content"] for r in replies}
    assert texts == {f"champion: q{i}" for i in range(total)}  # never the challenger's
    assert {r.json()["model"] for r in replies} == {"champion"}
    state = read_record(tmp_path / "shadow" / "state.json", ShadowState)  # written at shutdown
    counts = state.counts
    assert gauge.peak <= slots
    assert counts.skipped_busy > 0 and counts.skipped_sampled_out == 0
    stored = pairs(tmp_path)
    kept = counts.failed if status != 200 else counts.mirrored
    assert len(stored) == kept == len(gauge.seen) > 0
    assert counts.mirrored + counts.failed + counts.skipped_busy == total
    assert counts.in_flight == 0 and counts.lost == 0 and counts.skipped_unusable == 0
    assert {body["model"] for body in gauge.seen} == {"chal-v2"}
    for pair in stored:
        asked = pair.messages[-1]["content"]
        assert pair.champion.text == f"champion: {asked}"
        assert pair.request_id.startswith("chatcmpl-champion-")
        assert pair.model == "champion" and pair.challenger_model == "chal-v2"
        assert pair.champion.completion_tokens == 2 and pair.champion.latency_s > 0
        if status == 200:
            assert pair.challenger.text == f"challenger: {asked}"
            assert pair.challenger.completion_tokens == 3 and pair.challenger.latency_s > 0.04
        else:
            assert pair.challenger.text is None and "HTTP 500" in (pair.challenger.error or "")
    assert health["counts"]["skipped_busy"] >= 0 and health["challenger_model"] == "chal-v2"
    served = "\n".join(r.text for r in replies)
    assert "challenger:" not in served
    assert "challenger:" not in log.path.read_text()  # nor logged as served traffic


async def test_a_full_slot_skips_and_counts_without_waiting(tmp_path: Path) -> None:
    gauge = Gauge()
    gauge.hold = True
    with running(fake_upstream("champion")) as champ, running(gauge.app) as chal:
        mirror = Mirror(shadow(chal, tmp_path, concurrency=1))
        proxy = Proxy(ProxySettings(upstream=champ), mirror)
        app = create_proxy_app(proxy)
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://p") as client:
            first = await client.post("/v1/chat/completions", json=chat("a"))
            while not gauge.seen:  # the one slot is taken, and held
                await asyncio.sleep(0.01)
            started = time.perf_counter()
            more = [await client.post("/v1/chat/completions", json=chat(f"b{i}")) for i in range(5)]
            took = time.perf_counter() - started
            assert mirror.counts().skipped_busy == 5 and mirror.counts().in_flight == 1
            gauge.release.set()
            await proxy.aclose()
    assert first.status_code == 200 and [r.status_code for r in more] == [200] * 5
    assert took < 2.0  # no user waited for the held challenger
    counts = mirror.counts()
    assert (counts.mirrored, counts.skipped_busy, counts.in_flight) == (1, 5, 0)
    assert [p.messages[0]["content"] for p in pairs(tmp_path)] == ["a"]


async def test_a_challenger_that_is_down_is_a_failed_pair(tmp_path: Path) -> None:
    with running(fake_upstream("champion")) as champ:
        mirror = Mirror(shadow("http://127.0.0.1:9", tmp_path, timeout_s=5.0))
        proxy = Proxy(ProxySettings(upstream=champ), mirror)
        app = create_proxy_app(proxy)
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://p") as client:
            reply = await client.post("/v1/chat/completions", json=chat("x"))
        await proxy.aclose()
    assert reply.json()["choices"][0]["message"]["content"] == "champion: x"
    (pair,) = pairs(tmp_path)
    assert pair.challenger.text is None and "ConnectError" in (pair.challenger.error or "")
    assert mirror.counts().failed == 1


async def test_a_stream_is_mirrored_as_a_whole_answer_and_text_is_scrubbed(
    tmp_path: Path,
) -> None:
    gauge = Gauge()
    secret = "mail me at ada@example.com"
    with running(fake_upstream("champion")) as champ, running(gauge.app) as chal:
        proxy = Proxy(ProxySettings(upstream=champ), Mirror(shadow(chal, tmp_path)))
        app = create_proxy_app(proxy)
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://p") as client:
            body = chat(secret, stream=True, stream_options={"include_usage": True})
            streamed = await client.post("/v1/chat/completions", json=body)
            other = await client.post("/v1/completions", json={"model": "m", "prompt": "p"})
        await proxy.aclose()
    assert streamed.headers["content-type"].startswith("text/event-stream")
    assert "challenger" not in streamed.text and other.status_code == 200
    (pair,) = pairs(tmp_path)  # text completions are not mirrored
    assert pair.streamed and "stream" not in gauge.seen[0] and "stream_options" not in gauge.seen[0]
    assert pair.champion.text == "champion: mail me at <EMAIL>"
    assert pair.messages[0]["content"] == "mail me at <EMAIL>"
    assert pair.challenger.text == "challenger: mail me at <EMAIL>"
    assert "ada@example.com" not in (tmp_path / "shadow" / "pairs.jsonl").read_text()


async def test_the_sample_is_a_fraction_and_reproducible(tmp_path: Path) -> None:
    bodies = [json.dumps(chat(f"q{i}")).encode() for i in range(4000)]
    chosen = [in_sample(b, 0, 0.1) for b in bodies]
    assert 0.08 < sum(chosen) / len(bodies) < 0.12
    assert chosen == [in_sample(b, 0, 0.1) for b in bodies]  # the same again
    assert chosen != [in_sample(b, 1, 0.1) for b in bodies]  # another seed, another sample
    assert all(in_sample(b, 0, 1.0) for b in bodies[:10])
    assert not any(in_sample(b, 0, 0.0) for b in bodies[:10])
    with running(fake_upstream("champion")) as champ, running(Gauge().app) as chal:
        mirror = Mirror(shadow(chal, tmp_path, fraction=0.0))
        proxy = Proxy(ProxySettings(upstream=champ), mirror)
        transport = httpx.ASGITransport(app=create_proxy_app(proxy), client=("127.0.0.1", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://p") as client:
            for i in range(3):
                await client.post("/v1/chat/completions", json=chat(f"q{i}"))
        await proxy.aclose()
    assert mirror.counts().skipped_sampled_out == 3 and pairs(tmp_path) == []


def test_the_challenger_must_be_loopback_or_the_upstream() -> None:
    upstream = "https://api.example.com/v1"
    assert check_shadow("http://127.0.0.1:8001/v1", upstream) == "http://127.0.0.1:8001"
    assert check_shadow("http://localhost:8001", upstream) == "http://localhost:8001"
    assert check_shadow("https://api.example.com/other", upstream) == (
        "https://api.example.com/other"
    )
    for elsewhere in ("http://api.example.com", "https://evil.example.com", "http://10.0.0.2:80"):
        with pytest.raises(InputError, match="loopback"):
            check_shadow(elsewhere, upstream)
    assert shadow_auth("https://api.example.com/x", upstream, "k") == "Bearer k"
    assert shadow_auth("http://127.0.0.1:8001", upstream, "k") is None


def test_the_command_refuses_a_challenger_elsewhere(tmp_path: Path) -> None:
    base = ("proxy", "--upstream", "http://127.0.0.1:9", "--log-dir", tmp_path / "t")
    ran = tuneloop(*base, "--shadow", "http://example.com:8000", "--shadow-model", "c")
    ran.assert_input_error("--shadow http://example.com:8000", "loopback")
    tuneloop(*base, "--shadow", "http://127.0.0.1:8001").assert_input_error("--shadow-model")
    no_log = ("proxy", "--upstream", "http://127.0.0.1:9", "--shadow", "http://127.0.0.1:8001")
    tuneloop(*no_log, "--shadow-model", "c").assert_input_error("--log-dir")
    itself = (*base, "--port", "8123", "--shadow", "http://127.0.0.1:8123", "--shadow-model", "c")
    tuneloop(*itself).assert_input_error("own address")
    assert not (tmp_path / "t" / "shadow").exists()


def test_the_installed_proxy_mirrors_and_writes_its_state(tmp_path: Path) -> None:
    with running(fake_upstream("champion")) as champ, running(fake_upstream("chal")) as chal:
        args = ("--upstream", champ, "--log-dir", tmp_path / "t", "--shadow", chal)
        with proxy_process(
            tmp_path, *args, "--shadow-model", "c", "--shadow-fraction", "1"
        ) as base:
            reply = httpx.post(f"{base}/v1/chat/completions", json=chat("hello"), timeout=30)
            deadline = time.monotonic() + 10
            while not pairs(tmp_path / "t") and time.monotonic() < deadline:
                time.sleep(0.05)
            health = httpx.get(f"{base}/health", timeout=10).json()
    assert reply.json()["choices"][0]["message"]["content"] == "champion: hello"
    (pair,) = pairs(tmp_path / "t")
    assert pair.challenger.text == "chal: hello" and pair.challenger_model == "c"
    assert health["shadow"]["counts"]["mirrored"] == 1
    state = read_record(tmp_path / "t" / "shadow" / "state.json", ShadowState)
    assert state.counts.mirrored == 1 and state.fraction == 1.0 and state.challenger == chal
