"""A cascade's trace in the traffic log: taken out of the response, validated, recorded beside
it (line version 2), a malformed one tolerated and noted; then through the proxy in front of
a stub cascade upstream, the log read back by `tuneloop status`."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from tuneloop.config.flywheel import FlywheelConfig, TriggersConfig
from tuneloop.flywheel.exchanges import TRAFFIC_SCHEMAS, read_traffic
from tuneloop.flywheel.render import render_status
from tuneloop.flywheel.status import FlywheelStatus, gather_status
from tuneloop.records import parse_record
from tuneloop.serve.proxy import Proxy, ProxySettings, create_proxy_app
from tuneloop.serve.traffic import TrafficLog, install_traffic
from tuneloop.serve.traffic.exchange import SCHEMA, exchange_line, take_trace
from tuneloop.tiers import CASCADE_FIELD, TIER_HEADER, CascadeTrace

from ..upstreams import running

NOW = "2026-12-05T12:00:00.000Z"


def step(name: str, confidence: float | None, kept: bool, cost: float, **extra: Any) -> dict:
    out = {"name": name, "kept": kept, "latency_s": 0.01, "cost_usd": cost, **extra}
    if confidence is not None:
        out.update(signal="mean_logprob", confidence=confidence, threshold=-0.5)
    return out


def trace(confidence: float, *, handed_off: bool) -> dict[str, Any]:
    """Tier `small` (confidence `confidence`, threshold −0.5), then `large` when handed off."""
    small = step("small", confidence, not handed_off, 1e-6, completion_tokens=4)
    if not handed_off:
        return {"tier": "small", "cost_usd": 1e-6, "steps": [small]}
    large = step("large", None, True, 3e-5, completion_tokens=6)
    large["latency_s"] = 0.2
    return {"tier": "large", "cost_usd": 3.1e-5, "steps": [small, large]}


def completion(cid: str, text: str, cascade: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": cid,
        "object": "chat.completion",
        "model": "cascade",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
    }
    if cascade is not None:
        body[CASCADE_FIELD] = cascade
    return body


def chat(text: str, **extra: Any) -> dict[str, Any]:
    return {"model": "cascade", "messages": [{"role": "user", "content": text}], **extra}


# ---- the line, pure ------------------------------------------------------------------------


def test_a_plain_exchange_is_written_as_before() -> None:
    response = completion("c1", "hi")
    line = exchange_line(chat("q"), response, NOW)
    assert line == {"timestamp": NOW, "request": chat("q"), "response": response}
    assert take_trace([response, {"choices": []}]).trace is None


def test_a_trace_is_moved_out_of_the_response_and_validated() -> None:
    response = completion("c1", "hi", trace(-0.9, handed_off=True))
    line = exchange_line(chat("q"), response, NOW)
    assert line["schema"] == SCHEMA and SCHEMA in TRAFFIC_SCHEMAS
    assert CASCADE_FIELD not in line["response"] and "cascade_error" not in line
    assert CASCADE_FIELD in response  # the caller's object is not touched
    recorded = CascadeTrace.model_validate(line["cascade"])
    assert recorded.tier == "large" and recorded.cost_usd == 3.1e-5
    small, large = recorded.steps
    assert (small.name, small.confidence, small.kept, small.completion_tokens) == (
        "small",
        -0.9,
        False,
        4,
    )
    assert (large.name, large.confidence, large.kept, large.latency_s) == ("large", None, True, 0.2)
    assert "confidence" not in line["cascade"]["steps"][1]  # nulls left out


def test_a_streamed_trace_is_read_from_the_chunk_that_carries_it() -> None:
    chunks: list[Any] = [
        {"id": "c1", "choices": [{"index": 0, "delta": {"role": "assistant"}}]},
        {"id": "c1", "choices": [{"index": 0, "delta": {"content": "4"}}]},
        {"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    chunks[1][CASCADE_FIELD] = trace(-0.1, handed_off=False)
    found = take_trace(chunks)
    assert found.trace is not None and found.trace.tier == "small" and found.error is None
    assert all(CASCADE_FIELD not in c for c in found.response)
    assert found.response[1]["choices"] == chunks[1]["choices"]


@pytest.mark.parametrize(
    ("cascade", "why"),
    [
        ({"tier": "small", "cost_usd": "cheap", "steps": []}, "tuneloop_cascade.cost_usd"),
        ({"tier": "small", "cost_usd": 0, "steps": [{"name": "small"}]}, "steps.0.kept"),
        ({"tier": "x", "cost_usd": 0, "steps": [step("small", None, True, 0.0)]}, "'x'"),
        ("not an object", "tuneloop_cascade"),
        ({"tier": "small", "cost_usd": 0, "steps": [], "secret": 1}, "secret"),
    ],
)
def test_a_malformed_trace_is_noted_not_raised(cascade: Any, why: str) -> None:
    line = exchange_line(chat("q"), completion("c1", "hi", cascade), NOW)
    assert line["schema"] == SCHEMA and "cascade" not in line
    assert why in line["cascade_error"]
    assert CASCADE_FIELD not in line["response"]
    assert line["response"]["choices"][0]["message"]["content"] == "hi"


def test_the_reader_skips_a_newer_line_and_notes_an_unreadable_trace(tmp_path: Path) -> None:
    base = {"timestamp": NOW, "request": chat("q"), "response": {"id": "c"}}
    lines = [
        {**base, "schema": "tuneloop.traffic/9"},
        {**base, "schema": SCHEMA, "cascade": {"tier": "small"}},
    ]
    (tmp_path / "traffic.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    traffic = read_traffic([tmp_path])
    assert len(traffic.skipped) == 1 and "upgrade tuneloop" in traffic.skipped[0]
    (exchange,) = traffic.exchanges
    assert exchange.cascade is None and exchange.cascade_error is not None
    assert "not read back" in exchange.cascade_error


async def test_a_responses_exchange_keeps_its_trace(tmp_path: Path) -> None:
    app = FastAPI()

    @app.post("/v1/responses")
    async def respond(request: Request) -> dict[str, Any]:
        await request.json()  # read, so that the middleware sees the request body
        text = {"type": "output_text", "text": "4"}
        return {
            "id": "resp_1",
            "object": "response",
            "model": "cascade",
            "output": [{"type": "message", "role": "assistant", "content": [text]}],
            CASCADE_FIELD: trace(0.2, handed_off=False),
        }

    log = TrafficLog(tmp_path)
    install_traffic(app, log)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        reply = await client.post("/v1/responses", json={"model": "cascade", "input": "2+2?"})
    log.close()
    assert reply.json()[CASCADE_FIELD]["tier"] == "small"
    (line,) = [json.loads(x) for x in log.path.read_text().splitlines()]
    assert line["response"]["object"] == "chat.completion" and line["cascade"]["tier"] == "small"


# ---- through the proxy ----------------------------------------------------------------------


def stub_cascade() -> FastAPI:
    """Answers `conf=<c>` with tier small when c ≥ −0.5, else hands off to large; `bad`
    with a malformed trace; `stream: true` puts the trace on the last content chunk."""
    app = FastAPI()
    count = iter(range(10_000))

    @app.post("/v1/chat/completions")
    async def answer(request: Request) -> Any:
        body = await request.json()
        text = body["messages"][-1]["content"]
        cid = f"chatcmpl-{next(count)}"
        if text == "bad":
            cascade: Any = {"tier": "small", "cost_usd": 1e-6, "steps": [{"name": "small"}]}
        else:
            c = float(text.removeprefix("conf="))
            cascade = trace(c, handed_off=c < -0.5)
        headers = {TIER_HEADER: str(cascade["tier"])}
        if body.get("stream"):
            return StreamingResponse(
                _events(cid, cascade), media_type="text/event-stream", headers=headers
            )
        return JSONResponse(completion(cid, "4", cascade), headers=headers)

    return app


async def _events(cid: str, cascade: Any) -> Any:
    def event(delta: dict[str, Any], extra: dict[str, Any] | None = None) -> bytes:
        chunk: dict[str, Any] = {"id": cid, "object": "chat.completion.chunk"}
        chunk["choices"] = [{"index": 0, "delta": delta}]
        return f"data: {json.dumps({**chunk, **(extra or {})})}\n\n".encode()

    yield event({"role": "assistant", "content": ""})
    yield event({"content": "4"}, {CASCADE_FIELD: cascade})
    yield event({})
    yield b"data: [DONE]\n\n"


async def test_the_proxy_logs_each_tier_and_status_reports_it(tmp_path: Path) -> None:
    # the first half of the first tier's confidences sits low, the second high: drift
    confidences = [-0.9, -0.8, -0.7, -0.6, -0.45, -0.4, -0.3, -0.2] + [-0.1] * 8
    log = TrafficLog(tmp_path / "traffic")
    with (
        running(stub_cascade()) as upstream,
        running(create_proxy_app(Proxy(ProxySettings(upstream=upstream)), log)) as base,
    ):
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            replies = [
                await client.post("/v1/chat/completions", json=chat(f"conf={c}"))
                for c in confidences[:-1]
            ]
            async with client.stream(
                "POST", "/v1/chat/completions", json=chat(f"conf={confidences[-1]}", stream=True)
            ) as streamed:
                raw = (await streamed.aread()).decode()
            bad = await client.post("/v1/chat/completions", json=chat("bad"))
            health = (await client.get("/health")).json()
    log.close()
    # the client gets every answer untouched: the trace in the body, the tier in the header
    assert all(r.status_code == 200 for r in [*replies, bad])
    assert replies[0].json()[CASCADE_FIELD]["tier"] == "large"
    assert replies[0].headers[TIER_HEADER] == "large"
    assert replies[-1].headers[TIER_HEADER] == "small"
    assert bad.json()[CASCADE_FIELD] == {
        "tier": "small",
        "cost_usd": 1e-6,
        "steps": [{"name": "small"}],
    }
    assert CASCADE_FIELD in raw
    assert health["traffic"]["counts"]["cascade_traces"] == 16
    assert health["traffic"]["counts"]["cascade_malformed"] == 1

    lines = [json.loads(x) for x in log.path.read_text().splitlines()]
    assert len(lines) == 17 and all(x["schema"] == SCHEMA for x in lines)
    first = lines[0]
    assert first["cascade"]["tier"] == "large" and first["cascade"]["cost_usd"] == 3.1e-5
    assert [s["name"] for s in first["cascade"]["steps"]] == ["small", "large"]
    assert first["cascade"]["steps"][0]["confidence"] == -0.9
    assert isinstance(lines[15]["response"], list)  # the stream's chunks
    assert lines[15]["cascade"]["tier"] == "small"
    assert "cascade" not in lines[16] and "steps.0.kept" in lines[16]["cascade_error"]
    assert not any(CASCADE_FIELD in json.dumps(x["response"]) for x in lines)

    flywheel = FlywheelConfig(traffic=[log.dir], triggers=TriggersConfig(drift_min_requests=16))
    status = gather_status(flywheel, ledger_path=None, last_round=None, now=0.0)
    tiers = status.tiers
    assert tiers is not None
    assert (tiers.traced, tiers.untraced, tiers.malformed) == (16, 1, 1)
    by = {f.tier: f for f in tiers.tiers}
    assert [f.tier for f in tiers.tiers] == ["small", "large", "all"]
    assert (by["large"].answered, by["small"].answered) == (4, 12)  # c < −0.5 handed off
    assert by["small"].coverage == 0.75 and by["large"].coverage == 0.25
    assert (by["small"].asked, by["large"].asked) == (16, 4)
    assert by["small"].mean_cost_usd == pytest.approx(1e-6)
    assert by["large"].mean_cost_usd == pytest.approx(3.1e-5)
    assert by["all"].mean_cost_usd == pytest.approx((12 * 1e-6 + 4 * 3.1e-5) / 16)
    assert by["large"].mean_latency_s == pytest.approx(0.21)
    assert by["all"].mean_latency_s == pytest.approx((12 * 0.01 + 4 * 0.21) / 16)
    # the later 8 all fall in the earlier 8's top bin (deciles of 8 values: edges at 7 of
    # them, −0.1 above all): (1 − 1/8)·ln 8 + 7·(1e-4 − 1/8)·ln(1e-4 · 8)
    drift = tiers.confidence
    expected = (1 - 1 / 8) * math.log(8) + 7 * (1e-4 - 1 / 8) * math.log(1e-4 * 8)
    assert drift.tier == "small" and (drift.reference, drift.recent, drift.bins) == (8, 8, 8)
    assert drift.psi == pytest.approx(expected) and drift.band == "significant"

    text = render_status(status)
    assert "cascade    16 of 17 recent exchanges traced; 1 malformed traces, not counted" in text
    assert "           small        12     75.0%     16  $1e-06       0.010 s" in text
    assert "           large         4     25.0%      4  $3.1e-05     0.210 s" in text
    assert "confidence small  PSI " in text and "significant (later 8 against earlier 8" in text
    document = status.to_json()
    assert document["schema"] == "tuneloop.flywheel_status/3"
    assert document["tiers"]["tiers"][0]["coverage"] == 0.75
    assert parse_record(json.loads(json.dumps(document)), FlywheelStatus, "status") == status
