"""The reverse proxy over real uvicorn servers on loopback: switching upstreams under load,
streaming, 502s, admin protection, and the traffic log behind it."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tuneloop.data.ingest import ingest_files
from tuneloop.errors import InputError
from tuneloop.serve.proxy import Proxy, ProxySettings, create_proxy_app, normalize_upstream
from tuneloop.serve.traffic import TrafficLog

from ..upstreams import fake_upstream, running


def chat(text: str, model: str = "any", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": text}], **extra}


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


ADMIN = {"authorization": "Bearer t"}
"""The admin token of the tests' proxies (`ProxySettings(admin_token="t")`)."""


def asgi_client(proxy: Proxy, client: tuple[str, int] = ("127.0.0.1", 5000)) -> httpx.AsyncClient:
    app = create_proxy_app(proxy)
    transport = httpx.ASGITransport(app=app, client=client)
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8100")


async def test_switching_upstream_under_load_fails_no_request(tmp_path: Path) -> None:
    total, concurrency, switch_at = 400, 16, 150
    log = TrafficLog(tmp_path)
    results: list[tuple[bool, int, str]] = []  # (started after the switch, status, model)
    switched = asyncio.Event()
    with (
        running(fake_upstream("A", delay_s=0.002)) as a,
        running(fake_upstream("B", delay_s=0.002)) as b,
    ):
        proxy = Proxy(ProxySettings(upstream=a, admin_token="t"))
        with running(create_proxy_app(proxy, log)) as base:
            queue = iter(range(total))
            async with httpx.AsyncClient(base_url=base, timeout=30) as client:

                async def worker() -> None:
                    for i in queue:
                        if i == switch_at:
                            body = {"upstream": b}
                            answer = await client.post("/admin/upstream", json=body, headers=ADMIN)
                            assert answer.json()["previous"] == a
                            switched.set()
                        after = switched.is_set()
                        reply = await client.post("/v1/chat/completions", json=chat(f"q{i}"))
                        model = reply.json().get("model", "") if reply.status_code == 200 else ""
                        results.append((after, reply.status_code, model))

                await asyncio.gather(*(worker() for _ in range(concurrency)))
                drained = await client.post("/admin/drain", json={"upstream": a}, headers=ADMIN)
                state = (await client.get("/admin/upstream", headers=ADMIN)).json()
    assert len(results) == total
    assert [r for r in results if r[1] != 200] == []  # zero failed requests
    assert {m for after, _, m in results if after} == {"B"}
    # requests taken before the switch but not yet sent may go to either
    assert sum(m == "A" for _, _, m in results) >= switch_at - concurrency
    assert drained.json()["drained"] is True
    assert state == {"upstream": b, "models": {}, "in_flight": {a: 0, b: 0}}
    rows = [json.loads(line) for line in log.path.read_text().splitlines()]
    assert len(rows) == total  # every exchange logged, the log closed at shutdown


async def test_in_flight_requests_finish_on_the_old_upstream() -> None:
    with (
        running(fake_upstream("old", delay_s=0.5)) as old,
        running(fake_upstream("new")) as new,
    ):
        proxy = Proxy(ProxySettings(upstream=old))
        with running(create_proxy_app(proxy)) as base:
            async with httpx.AsyncClient(base_url=base, timeout=30) as client:
                slow = asyncio.ensure_future(client.post("/v1/chat/completions", json=chat("x")))
                while proxy.in_flight().get(old) != 1:
                    await asyncio.sleep(0.01)
                assert proxy.switch(new) == old
                fast = await client.post("/v1/chat/completions", json=chat("y"))
                assert fast.json()["model"] == "new" and not slow.done()
                assert await proxy.drain(old, timeout=0.05) is False
                assert await proxy.drain(old, timeout=5) is True
                assert (await slow).json()["model"] == "old"
                assert proxy.in_flight() == {old: 0, new: 0}


async def test_a_route_renames_the_model_asked_for_and_drains_on_its_own() -> None:
    """The managed service's hot-load: the same upstream under a new name is a new route; the
    old route's requests finish as they were sent and a drain waits for them alone."""
    with running(fake_upstream("vllm", delay_s=0.5)) as url:
        proxy = Proxy(ProxySettings(upstream=url, admin_token="t"))
        with running(create_proxy_app(proxy)) as base:
            async with httpx.AsyncClient(base_url=base, timeout=30) as client:
                slow = asyncio.ensure_future(
                    client.post("/v1/chat/completions", json=chat("x", "champion"))
                )
                while proxy.in_flight().get(url) != 1:
                    await asyncio.sleep(0.01)
                body = {"upstream": url, "models": {"champion": "champion-v2"}}
                switched = await client.post("/admin/upstream", json=body, headers=ADMIN)
                assert switched.json()["models"] == {"champion": "champion-v2"}
                new = asyncio.ensure_future(
                    client.post("/v1/chat/completions", json=chat("y", "champion"))
                )
                while proxy.in_flight().get(url) != 2:
                    await asyncio.sleep(0.01)
                assert await proxy.drain(url, timeout=5, models={}) is True  # the old route
                # the proxy has answered the old route's request; its client sees it next
                await asyncio.wait_for(asyncio.shield(slow), timeout=2)
                assert not new.done()
                other = await client.post("/v1/chat/completions", json=chat("z", "base"))
                assert (await new).headers["x-seen-model"] == "champion-v2"
    assert (await slow).headers["x-seen-model"] == "champion"
    assert other.headers["x-seen-model"] == "base"  # a name the route does not rename
    route = proxy._current
    assert route.renamed(b"not json") == b"not json"
    assert route.renamed(b'["champion"]') == b'["champion"]'
    assert json.loads(route.renamed(b'{"model": "champion", "n": 2}')) == {
        "model": "champion-v2",
        "n": 2,
    }


@pytest.mark.parametrize("models", ['["a"]', '{"champion": 2}', '{"": "x"}'])
async def test_renames_must_map_names_to_names(models: str) -> None:
    headers = {**ADMIN, "content-type": "application/json"}
    body = f'{{"upstream": "http://127.0.0.1:1", "models": {models}}}'
    async with asgi_client(Proxy(ProxySettings(upstream="http://a:1", admin_token="t"))) as client:
        answer = await client.post("/admin/upstream", content=body, headers=headers)
        drain = await client.post("/admin/drain", content=body, headers=headers)
    assert (answer.status_code, drain.status_code) == (400, 400)
    assert answer.json()["error"]["param"] == "models"


async def test_an_unreachable_upstream_is_a_502_naming_the_reason() -> None:
    proxy = Proxy(ProxySettings(upstream=f"http://127.0.0.1:{closed_port()}"))
    with running(create_proxy_app(proxy)) as base:
        async with httpx.AsyncClient(base_url=base) as client:
            reply = await client.post("/v1/chat/completions", json=chat("hi"))
            health = await client.get("/health")
    assert reply.status_code == 502
    error = reply.json()["error"]
    assert error["type"] == "upstream_error" and error["code"] == "upstream_unreachable"
    assert "unreachable" in error["message"] and "ConnectError" in error["message"]
    assert health.status_code == 502 and health.json()["status"] == "upstream_unreachable"
    assert proxy.in_flight() == {proxy.upstream: 0}


async def test_the_openai_client_through_the_proxy_with_feedback(tmp_path: Path) -> None:
    log = TrafficLog(tmp_path)
    with (
        running(fake_upstream("champion")) as upstream,
        running(create_proxy_app(Proxy(ProxySettings(upstream=upstream)), log)) as base,
    ):
        client = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
        reply = await client.chat.completions.create(
            model="champion", messages=[{"role": "user", "content": "hello there"}]
        )
        stream = await client.chat.completions.create(
            model="champion",
            messages=[{"role": "user", "content": "stream this"}],
            stream=True,
        )
        parts = [c.choices[0].delta.content or "" async for c in stream if c.choices]
        models = await client.models.list()
        async with httpx.AsyncClient(base_url=base) as http:
            fb = {"completion_id": reply.id, "verdict": "down", "correction": "hi!"}
            assert (await http.post("/v1/feedback", json=fb)).status_code == 200
        await client.close()
    assert reply.choices[0].message.content == "champion: hello there"
    assert "".join(parts) == "champion: stream this"
    assert [m.id for m in models.data] == ["champion"]
    traces, rejects, _ = ingest_files("openai_chat", [log.path])
    assert rejects == [] and len(traces) == 2
    rated = {t.source_id: t.feedback for t in traces}[reply.id]
    assert rated is not None and rated.verdict == "down" and rated.correction == "hi!"


async def test_a_stream_is_relayed_as_it_arrives() -> None:
    with (
        running(fake_upstream("s", chunk_delay_s=0.25)) as upstream,
        running(create_proxy_app(Proxy(ProxySettings(upstream=upstream)))) as base,
    ):
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            start = time.monotonic()
            arrivals = []
            body = chat("a b c", stream=True)
            async with client.stream("POST", "/v1/chat/completions", json=body) as reply:
                async for line in reply.aiter_lines():
                    if line.startswith("data: {"):
                        arrivals.append(time.monotonic() - start)
    assert len(arrivals) == 6  # role, "s:", "a", "b", "c", stop
    assert arrivals[-1] - arrivals[0] > 0.7  # the first event did not wait for the last


async def test_admin_routes_answer_loopback_and_the_token_only() -> None:
    proxy = Proxy(ProxySettings(upstream="http://127.0.0.1:1", admin_token="t"))
    body = {"upstream": "http://127.0.0.1:2/v1"}
    async with asgi_client(proxy, client=("10.0.0.7", 5000)) as remote:
        assert (await remote.post("/admin/upstream", json=body)).status_code == 403
    async with asgi_client(proxy) as local:
        assert (await local.post("/admin/upstream", json=body)).status_code == 401
        auth = {"authorization": "Bearer t"}
        bad = await local.post("/admin/upstream", json={"upstream": "ftp://x"}, headers=auth)
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "upstream"
        ok = await local.post("/admin/upstream", json=body, headers=auth)
        assert ok.json()["upstream"] == "http://127.0.0.1:2"
        assert ok.json()["previous"] == "http://127.0.0.1:1"
    assert proxy.upstream == "http://127.0.0.1:2"


@pytest.mark.parametrize(
    ("headers", "status", "needle"),
    [
        ({"host": "evil.example:8100"}, 403, "Host"),  # DNS rebinding
        ({"origin": "http://evil.example"}, 403, "Origin"),
        ({"origin": "null"}, 403, "Origin"),
        ({"content-type": "text/plain"}, 415, "application/json"),
        ({"content-type": "application/x-www-form-urlencoded"}, 415, "application/json"),
    ],
)
async def test_admin_routes_refuse_what_a_browser_page_can_send(
    headers: dict[str, str], status: int, needle: str
) -> None:
    """Issue 25 defect 1: a page's simple POST (text/plain, foreign Origin, rebound Host)
    never switches the upstream, even with the token."""
    proxy = Proxy(ProxySettings(upstream="http://127.0.0.1:1", admin_token="t"))
    body = json.dumps({"upstream": "http://127.0.0.1:2"})
    sent = {"content-type": "application/json", **ADMIN, **headers}
    async with asgi_client(proxy) as local:
        answer = await local.post("/admin/upstream", content=body, headers=sent)
        drain = await local.post("/admin/drain", content=body, headers=sent)
    assert (answer.status_code, drain.status_code) == (status, status), answer.text
    assert needle in answer.json()["error"]["message"]
    assert proxy.upstream == "http://127.0.0.1:1"


async def test_admin_routes_are_off_without_a_token_and_take_their_own_origin() -> None:
    proxy = Proxy(ProxySettings(upstream="http://127.0.0.1:1"))
    async with asgi_client(proxy) as local:
        off = await local.get("/admin/upstream")
    assert off.status_code == 403 and "--admin-token-file" in off.json()["error"]["message"]
    proxy = Proxy(ProxySettings(upstream="http://127.0.0.1:1", admin_token="t"))
    own = {**ADMIN, "origin": "http://127.0.0.1:8100", "host": "localhost:8100"}
    async with asgi_client(proxy) as local:
        mine = await local.get(
            "/admin/upstream", headers={**ADMIN, "origin": "http://127.0.0.1:8100"}
        )
        other = await local.get("/admin/upstream", headers=own)  # Origin ≠ http://<Host>
    assert mine.status_code == 200 and other.status_code == 403


async def test_the_upstream_key_goes_only_where_it_is_configured() -> None:
    """Issue 25 defect 1: a switched-in upstream gets the key only when the switch says so;
    the configured upstream's origin keeps it."""
    with (
        running(fake_upstream("configured")) as configured,
        running(fake_upstream("other")) as other,
    ):
        settings = ProxySettings(upstream=configured, upstream_key="up-secret", admin_token="t")
        proxy = Proxy(settings)
        async with asgi_client(proxy) as client:
            seen = []
            for switch in (
                {"upstream": other},
                {"upstream": f"{configured}/v1"},
                {"upstream": other, "upstream_key": True},
            ):
                ok = await client.post("/admin/upstream", json=switch, headers=ADMIN)
                assert ok.status_code == 200, ok.text
                reply = await client.post("/v1/chat/completions", json=chat("hi"))
                seen.append((reply.json()["model"], reply.headers["x-seen-authorization"]))
            bad = await client.post(
                "/admin/upstream", json={"upstream": other, "upstream_key": "yes"}, headers=ADMIN
            )
        await proxy.aclose()
        keyless = Proxy(ProxySettings(upstream=configured, admin_token="t"))
        async with asgi_client(keyless) as client:
            asked = {"upstream": other, "upstream_key": True}
            refused = await client.post("/admin/upstream", json=asked, headers=ADMIN)
    assert seen == [
        ("other", ""),
        ("configured", "Bearer up-secret"),
        ("other", "Bearer up-secret"),
    ]
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "upstream_key"

    assert refused.status_code == 400 and "--upstream-key-env" in refused.text
    assert keyless.upstream == configured


@pytest.mark.parametrize("timeout", ["NaN", "Infinity", "-1", "true", '"5"'])
async def test_a_drain_timeout_must_be_a_finite_number(timeout: str) -> None:
    """`timeout_s: NaN` passed the `< 0` check and made a drain wait forever."""
    proxy = Proxy(ProxySettings(upstream="http://127.0.0.1:1", admin_token="t"))
    drain = f'{{"upstream": "http://127.0.0.1:1", "timeout_s": {timeout}}}'
    headers = {**ADMIN, "content-type": "application/json"}
    async with asgi_client(proxy) as client:
        answer = await client.post("/admin/drain", content=drain, headers=headers)
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "timeout_s"


async def test_keys_body_cap_and_unknown_routes() -> None:
    with running(fake_upstream("k")) as upstream:
        settings = ProxySettings(upstream=upstream, api_key="client", max_body_bytes=300)
        async with asgi_client(Proxy(settings)) as client:
            assert (await client.post("/v1/chat/completions", json=chat("hi"))).status_code == 401
            auth = {"authorization": "Bearer client"}
            ok = await client.post("/v1/chat/completions", json=chat("hi"), headers=auth)
            assert ok.status_code == 200 and ok.headers["x-seen-authorization"] == ""
            big = await client.post("/v1/chat/completions", json=chat("x" * 400), headers=auth)
            assert big.status_code == 413 and big.json()["error"]["code"] == "request_too_large"
            missing = await client.get("/nope")
            assert missing.status_code == 404 and missing.json()["error"]["type"]
        settings = ProxySettings(upstream=upstream, upstream_key="upstream-secret")
        async with asgi_client(Proxy(settings)) as client:
            ok = await client.post("/v1/chat/completions", json=chat("hi"))
            assert ok.headers["x-seen-authorization"] == "Bearer upstream-secret"
        async with asgi_client(Proxy(ProxySettings(upstream=upstream))) as client:
            mine = {"authorization": "Bearer mine"}
            ok = await client.post("/v1/chat/completions", json=chat("hi"), headers=mine)
            assert ok.headers["x-seen-authorization"] == "Bearer mine"  # passed through


@pytest.mark.parametrize(
    ("given", "base"),
    [
        ("http://h:1", "http://h:1"),
        ("http://h:1/v1/", "http://h:1"),
        ("https://api.example.com/api/v1", "https://api.example.com/api"),
    ],
)
def test_upstream_urls_are_normalized(given: str, base: str) -> None:
    assert normalize_upstream(given) == base


@pytest.mark.parametrize("bad", ["ftp://h", "h:1", "http://", "http://h/?x=1"])
def test_bad_upstream_urls_are_input_errors(bad: str) -> None:
    with pytest.raises(InputError, match="upstream"):
        normalize_upstream(bad)


async def test_a_timeout_is_a_504_and_unforwarded_methods_a_405() -> None:
    with running(fake_upstream("slow", delay_s=1.0)) as upstream:
        proxy = Proxy(ProxySettings(upstream=upstream, read_timeout_s=0.2))
        async with asgi_client(proxy) as client:
            late = await client.post("/v1/chat/completions", json=chat("hi"))
            head = await client.request("OPTIONS", "/v1/models")
        await proxy.aclose()
    assert late.status_code == 504 and late.json()["error"]["code"] == "upstream_timeout"
    assert head.status_code == 405 and head.json()["error"]["type"] == "invalid_request_error"
    assert proxy.in_flight() == {upstream: 0}


async def test_a_dropped_connection_is_retried_and_headers_pass_as_sent() -> None:
    """The upstream closes the first connection without answering (as one whose keep-alive
    ran out does); the proxy retries once and adds no header the client did not send."""
    heads: list[bytes] = []
    reply = b'{"id": "x"}'

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        heads.append(head)
        at = head.lower().index(b"content-length:") + 15
        await reader.readexactly(int(head[at : head.index(b"\r\n", at)]))
        if len(heads) > 1:
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\n\r\n%s" % (len(reply), reply)
            )
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    proxy = Proxy(ProxySettings(upstream=f"http://127.0.0.1:{port}/v1"))
    async with asgi_client(proxy) as client:
        answer = await client.post("/v1/chat/completions?x=1%202", content=b"{}")
    await proxy.aclose()
    server.close()
    assert answer.status_code == 200 and answer.content == reply
    assert len(heads) == 2 and heads[0] == heads[1]
    lines = heads[1].decode().lower().split("\r\n")
    assert lines[0] == "post /v1/chat/completions?x=1%202 http/1.1"
    names = {line.split(":")[0] for line in lines[1:] if line}
    # httpx's request headers (its `connection: keep-alive` is hop-by-hop: dropped), the
    # body's length, and accept-encoding set to identity; aiohttp's own defaults left out
    assert names == {"host", "accept", "user-agent", "content-length", "accept-encoding"}
    assert "accept-encoding: identity" in lines and "user-agent: python-httpx" in heads[1].decode()
