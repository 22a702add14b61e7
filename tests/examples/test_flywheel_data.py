"""The flywheel's suite and traffic simulator: reproducibility, disjointness, drift, bounds.

The live tests run the simulator through the official `openai` client against a small fake
OpenAI-compatible FastAPI server on loopback (uvicorn in a thread, no model): it answers every
question right except word problems (`story`), so the accuracy users see falls as they drift.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import pairwise
from pathlib import Path
from types import ModuleType

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from tuneloop.stats.drift import psi
from tuneloop.suite import load_suite, normalize_prompt, slice_ids

from .conftest import ARITH, load_script

STYLES = ("symbolic", "words", "chatty", "story")


@pytest.fixture(scope="module")
def mfs() -> ModuleType:
    return load_script("make_flywheel_suite")


@pytest.fixture(scope="module")
def sim() -> ModuleType:
    return load_script("simulate_traffic")


@pytest.fixture(scope="module")
def fw_items(make_data) -> list[dict]:
    return make_data.read_items(ARITH / "flywheel_suite.jsonl")


def numbers(prompt: str) -> tuple[int, int]:
    """The two operands of a question, read from its text alone (larger first)."""
    found = [int(x) for x in re.findall(r"\d+", prompt)]
    assert len(found) == 2, prompt
    return max(found), min(found)


def user_texts(path: Path) -> list[str]:
    """The user messages of every readable line of a traffic/trace log."""
    out = []
    for line in path.read_text().splitlines():
        try:
            messages = json.loads(line)["request"]["messages"]
        except (json.JSONDecodeError, KeyError):
            continue
        out += [m["content"] for m in messages if m.get("role") == "user"]
    return out


# ---- the suite -------------------------------------------------------------------------------


def test_flywheel_suite_regenerates_byte_identical(mfs, tmp_path):
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    mfs.main(["--out", str(first)])
    mfs.main(["--out", str(second)])
    assert first.read_bytes() == second.read_bytes()
    assert first.read_bytes() == (ARITH / "flywheel_suite.jsonl").read_bytes()


def test_flywheel_suite_shape_answers_and_slices(fw_items, suite_items):
    assert 400 <= len(fw_items) <= 600
    ids = [it["id"] for it in fw_items]
    assert len(set(ids)) == len(ids)
    assert set(ids).isdisjoint(it["id"] for it in suite_items)
    for it in fw_items:
        assert set(it) == {"id", "messages", "answer", "scorer", "tags"}
        assert it["scorer"] == "numeric"
        assert [m["role"] for m in it["messages"]] == ["user"]
        op, digits, style = it["tags"]
        assert op in ("add", "sub") and digits == "2d" and style in STYLES
        big, small = numbers(it["messages"][0]["content"])
        assert it["answer"] == str(big + small if op == "add" else big - small), it["id"]
    assert Counter(it["tags"][2] for it in fw_items) == {s: len(fw_items) // 4 for s in STYLES}
    # The suite loads as a suite, and holds an audit part plus 8 one-look slices of >= 40.
    suite = load_suite(ARITH / "flywheel_suite.jsonl")
    fractions = {"audit": 0.2, **{f"gate{i}": 0.1 for i in range(1, 9)}}
    for name in fractions:
        assert len(slice_ids(suite, fractions, name)) >= 40, name


def test_flywheel_suite_is_disjoint_from_everything_the_model_saw(
    make_data, build_model, fw_items, suite_items, train_items
):
    fw = {normalize_prompt(it["messages"][0]["content"]) for it in fw_items}
    assert len(fw) == len(fw_items)
    traces = user_texts(ARITH / "traces" / "production.jsonl")
    assert len(traces) > 1000
    for other in (suite_items, train_items):
        assert fw.isdisjoint(normalize_prompt(it["messages"][0]["content"]) for it in other)
    assert fw.isdisjoint(normalize_prompt(t) for t in traces)

    # Stronger: no fact (op, larger operand, smaller operand) is shared, in any wording or
    # operand order, and no two items ask the same one.
    def key(op: str, prompt: str) -> tuple[str, int, int]:
        return (op, *numbers(prompt))

    fw_keys = {key(it["tags"][0], it["messages"][0]["content"]) for it in fw_items}
    assert len(fw_keys) == len(fw_items)
    for other in (suite_items, train_items):
        assert fw_keys.isdisjoint(key(it["tags"][0], it["messages"][0]["content"]) for it in other)
    patterns = (
        ("add", r"(\d+) (?:\+|plus|and) (\d+)"),
        ("sub", r"(\d+) (?:-|minus|from|take away) (\d+)"),
    )
    matched = 0
    for text in traces:
        found = [(op, m) for op, pattern in patterns for m in re.finditer(pattern, text)]
        matched += bool(found)
        for op, m in found:
            a, b = int(m[1]), int(m[2])
            assert (op, max(a, b), min(a, b)) not in fw_keys, text
    assert matched == len(traces)
    info = json.loads((ARITH / "model" / "build_info.json").read_text())
    assert info["pretraining_problems"] == build_model.STEPS * build_model.BATCH
    pretraining = build_model.pretraining_problems(
        info["pretraining_problems"], ARITH / "suite.jsonl"
    )
    seen = {(p.op, max(p.a, p.b), min(p.a, p.b)) for p in pretraining}
    assert fw_keys.isdisjoint(seen)


def test_every_template_parses_back_and_fits_the_context(mfs, make_data):
    transformers = pytest.importorskip("transformers")
    tok = transformers.AutoTokenizer.from_pretrained(ARITH / "model")
    for style, by_op in mfs.STYLES.items():
        for op, templates in by_op.items():
            for i in range(len(templates)):
                q = mfs.Question(make_data.Problem(99, op, 98), style, i)
                assert mfs.parse_question(q.prompt) == q
                messages = [{"role": "user", "content": q.prompt}]
                ids = tok.apply_chat_template(messages, add_generation_prompt=True)
                ids = ids["input_ids"] if hasattr(ids, "keys") else ids
                assert len(ids) <= 100, q.prompt
    with pytest.raises(ValueError):
        mfs.parse_question("What is 3 times 4?")


# ---- the schedule and the scripted traffic log --------------------------------------------------


def test_plan_is_deterministic_and_never_asks_a_suite_fact(sim, mfs):
    first = sim.plan(600, seed=5)
    assert first == sim.plan(600, seed=5)
    assert first != sim.plan(600, seed=6)
    held = sim.suite_facts()
    assert len(held) > 320 + 480 - 10  # a few suite.jsonl sums ask one fact in both orders
    assert not any(mfs.fact(a.question.problem) in held for a in first)
    assert 0.4 < sum(a.rate for a in first) / len(first) < 0.6
    assert [a.phase for a in first[:200]] == ["launch"] * 200
    assert [a.phase for a in first[-200:]] == ["shift"] * 200


def test_dry_run_writes_the_traffic_log_format(sim, tmp_path):
    out = tmp_path / "traffic.jsonl"
    result = sim.dry_run(out, 120, seed=3, feedback_rate=0.5, error_rate=0.3)
    again = sim.dry_run(tmp_path / "again.jsonl", 120, seed=3, feedback_rate=0.5, error_rate=0.3)
    assert out.read_bytes() == (tmp_path / "again.jsonl").read_bytes()
    assert result.as_dict() == again.as_dict()
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    exchanges = {}
    feedback = []
    for line in lines:
        if line.get("type") == "feedback":
            feedback.append(line)
            continue
        assert set(line) == {"timestamp", "request", "response"}
        request, response = line["request"], line["response"]
        assert request["messages"][0]["role"] == "user"
        assert request["metadata"]["tag"] in STYLES
        assert response["object"] == "chat.completion"
        (choice,) = response["choices"]
        assert choice["index"] == 0 and choice["finish_reason"] == "stop"
        assert choice["message"]["role"] == "assistant"
        exchanges[response["id"]] = line
    assert len(exchanges) == result.requests == 120
    assert len(feedback) == result.feedback_sent and 40 < len(feedback) < 80
    timestamps = [line["timestamp"] for line in lines]
    assert timestamps == sorted(timestamps)  # ISO 8601 with a fixed width sorts as time
    assert timestamps[0] == "2026-09-21T14:13:20.000Z"
    wrong = 0
    for fb in feedback:
        ex = exchanges[fb["completion_id"]]
        big, small = numbers(ex["request"]["messages"][0]["content"])
        said = ex["response"]["choices"][0]["message"]["content"]
        truth = {str(big + small), str(big - small)}
        if fb["verdict"] == "up":
            assert "correction" not in fb and said in truth
        else:
            wrong += 1
            assert (
                fb["verdict"] == "down" and fb["correction"] in truth and said != fb["correction"]
            )
    assert wrong > 0
    answered = sum(s.answered for s in result.phases.values())
    assert answered == 120 and 0.5 < sum(s.correct for s in result.phases.values()) / 120 < 0.9


def test_dry_run_takes_the_answers_from_a_callable(sim, tmp_path):
    out = tmp_path / "traffic.jsonl"
    result = sim.dry_run(out, 30, seed=1, feedback_rate=1.0, answer_fn=lambda ask, rng: "nope")
    verdicts = [json.loads(x).get("verdict") for x in out.read_text().splitlines()]
    assert verdicts.count("down") == 30 and "up" not in verdicts
    assert result.feedback_sent == 30
    assert all(s.correct == 0 for s in result.phases.values())


def test_dry_run_log_ingests_with_its_feedback_joined(sim, tmp_path):
    from tuneloop.data.ingest import ingest_files

    out = tmp_path / "traffic.jsonl"
    result = sim.dry_run(out, 50, seed=8, t0=1_800_000_000)
    traces, rejects, _ = ingest_files("openai_chat", [out])
    assert not rejects and len(traces) == 50
    rated = [t for t in traces if t.feedback is not None]
    assert len(rated) == result.feedback_sent > 0
    assert traces[0].messages[0].content == sim.plan(50, 8)[0].prompt


def test_wording_shift_moves_prompt_length_and_tags(sim, tmp_path):
    out = tmp_path / "traffic.jsonl"
    sim.dry_run(out, 900, seed=11)
    asks = [json.loads(x) for x in out.read_text().splitlines()]
    asks = [a["request"] for a in asks if "request" in a]
    first, last = asks[:300], asks[-300:]

    def lengths(requests: list[dict]) -> list[int]:
        return [len(r["messages"][0]["content"]) for r in requests]

    edges = [0, 20, 30, 45, 60, 1000]

    def histogram(values: list[int]) -> list[int]:
        return [sum(lo <= v < hi for v in values) for lo, hi in pairwise(edges)]

    mean_first = sum(lengths(first)) / 300
    mean_last = sum(lengths(last)) / 300
    assert mean_last - mean_first > 20
    words_first = sum(len(r["messages"][0]["content"].split()) for r in first) / 300
    words_last = sum(len(r["messages"][0]["content"].split()) for r in last) / 300
    assert words_last - words_first > 4
    assert psi(histogram(lengths(first)), histogram(lengths(last)), eps=1e-4) > 0.25
    tags_first = Counter(r["metadata"]["tag"] for r in first)
    tags_last = Counter(r["metadata"]["tag"] for r in last)
    assert tags_first["story"] == 0 and tags_last["story"] > 90
    assert tags_first["symbolic"] > 120 and tags_last["symbolic"] < 60
    styles = list(STYLES)
    assert psi([tags_first[s] for s in styles], [tags_last[s] for s in styles], eps=1e-4) > 0.25


# ---- loopback only -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/v1",
        "https://api.openai.com/v1",
        "http://10.0.0.1:8000/v1",
        "http://0.0.0.0:8000/v1",
        "http://127.0.0.1.nip.io/v1",
        "http://localhost@evil.example/v1",
        "ftp://127.0.0.1/v1",
        "127.0.0.1:8000/v1",
    ],
)
def test_refuses_anything_but_loopback(sim, url):
    with pytest.raises(ValueError, match="only talks to a server on this machine"):
        sim.check_loopback(url)
    with pytest.raises(ValueError):
        sim.simulate(url, "m", 3, seed=0)


def test_refuses_settings_that_would_hang_or_make_no_sense(sim):
    with pytest.raises(ValueError, match="concurrency"):
        sim.simulate("http://127.0.0.1:9/v1", "m", 3, seed=0, concurrency=0)
    with pytest.raises(ValueError, match="feedback_rate"):
        sim.plan(3, seed=0, feedback_rate=1.5)


def test_a_server_that_is_not_there_counts_as_failed_requests(sim):
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = sim.simulate(f"http://127.0.0.1:{port}/v1", "m", 3, seed=0, concurrency=3)
    assert result.requests == result.failures == 3
    assert result.errors == {"APIConnectionError": 3}
    assert result.feedback_sent == result.feedback_failed == 0


def test_accepts_loopback(sim):
    for url in ("http://127.0.0.1:8000/v1", "http://localhost:1234/v1", "https://LOCALHOST/v1"):
        assert sim.check_loopback(url) == url


def test_command_refuses_a_remote_url_with_exit_2():
    script = ARITH / "simulate_traffic.py"
    args = [sys.executable, str(script), "--base-url", "http://example.com/v1", "--model", "m"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "only talks to a server on this machine" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_command_dry_run_prints_one_line(sim, tmp_path, capsys):
    assert sim.main(["--dry-run", "--out", str(tmp_path / "t.jsonl"), "-n", "12"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("simulate: 12 requests, 0 failed; feedback ")
    with pytest.raises(SystemExit) as err:
        sim.main(["--dry-run", "-n", "3"])
    assert err.value.code == 2


# ---- live, against a fake OpenAI-compatible server ---------------------------------------------


class FakeServer:
    """Answers arithmetic right except word problems; 500 for `fail_user`; delays answers."""

    def __init__(self, mfs: ModuleType, feedback: bool, fail_user: str | None, delay: float):
        self.requests: list[dict] = []
        self.feedback: list[dict] = []
        self.app = FastAPI()

        @self.app.post("/v1/chat/completions")
        async def chat(request: Request) -> JSONResponse:
            body = await request.json()
            self.requests.append(body)
            if body.get("user") == fail_user:
                return JSONResponse({"error": {"message": "boom"}}, status_code=500)
            await asyncio.sleep(delay)
            q = mfs.parse_question(body["messages"][-1]["content"])
            answer = "0" if q.style == "story" else q.answer
            return JSONResponse(completion(f"chatcmpl-fake-{len(self.requests)}", answer))

        if feedback:

            @self.app.post("/v1/feedback")
            async def rate(request: Request) -> dict:
                self.feedback.append(await request.json())
                return {"ok": True}


def completion(completion_id: str, content: str) -> dict:
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": 0,
        "model": "fake",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


@contextmanager
def serve(app) -> Iterator[str]:
    """Run `app` with uvicorn in a thread on a free loopback port; yields its /v1 base URL."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "fake server did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@pytest.fixture
def fake(mfs):
    def make(feedback: bool = True, fail_user: str | None = None, delay: float = 0.0):
        return FakeServer(mfs, feedback, fail_user, delay)

    return make


def test_live_simulation_tags_checks_and_rates(sim, fake):
    server = fake()
    with serve(server.app) as base_url:
        result = sim.simulate(base_url, "fake", 60, seed=3, feedback_rate=0.5, concurrency=4)
    asks = sim.plan(60, 3, 0.5)
    assert result.requests == 60 and result.failures == 0 and result.stopped_by == "count"
    assert sorted(r["messages"][0]["content"] for r in server.requests) == sorted(
        a.prompt for a in asks
    )
    assert {r["metadata"]["tag"] for r in server.requests} <= set(STYLES)
    assert all(r["model"] == "fake" and r["max_tokens"] == 8 for r in server.requests)
    assert result.feedback_sent == len(server.feedback) == sum(a.rate for a in asks)
    for fb in server.feedback:
        assert fb["completion_id"].startswith("chatcmpl-fake-")
        assert fb["verdict"] in ("up", "down") and ("correction" in fb) == (fb["verdict"] == "down")
    stories = {s: sum(a.style == "story" for a in asks if a.phase == s) for s in result.phases}
    for name, stats in result.phases.items():
        assert stats.answered == 20 and stats.correct == 20 - stories[name]
    assert result.phases["shift"].accuracy < result.phases["launch"].accuracy == 1.0
    assert "60 requests, 0 failed" in result.summary()


def test_live_counts_missing_feedback_and_failed_requests(sim, fake):
    server = fake(feedback=False, fail_user="sim-user-0")
    with serve(server.app) as base_url:
        result = sim.simulate(base_url, "fake", 24, seed=4, feedback_rate=1.0, concurrency=8)
    failed = sum(a.user == "sim-user-0" for a in sim.plan(24, 4, 1.0))
    assert failed > 0
    assert result.requests == 24 and result.failures == failed
    assert result.feedback_not_found == 24 - failed and result.feedback_sent == 0
    assert sum(s.answered for s in result.phases.values()) == 24 - failed


def test_live_stops_at_the_time_limit(sim, fake):
    server = fake(delay=0.05)
    with serve(server.app) as base_url:
        start = time.monotonic()
        result = sim.simulate(base_url, "fake", 10_000, seed=0, max_seconds=0.5, concurrency=2)
        elapsed = time.monotonic() - start
    assert result.stopped_by == "time"
    assert 0 < result.requests < 10_000 and elapsed < 5
