"""Fake OpenAI-compatible teachers (a bare ASGI app under uvicorn in a thread, port 0).

One server plays every teacher: the requested `model` picks the behaviour, so a teachers file
can point several teachers at it. Arithmetic prompts ("What is A + B?") are answered by
`right` correctly, by `wrong` off by one, by `even` correctly only when A + B is even.
Fault knobs: `error500` always answers 500, `slow` sleeps past any sane timeout, `malformed`
answers a 200 that is no completion, `non_string` gives `content: 42`, `echo` repeats the
request's Authorization header in its answer (a model repeating a key it was shown), `tool`
answers with a tool call. `flaky` answers 500 to the first request of each prompt, then
correctly. Every request is counted per (model, conversation) and kept.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from tuneloop.records.trace import Message, Trace

from ..judge_fixture import fake_judge  # noqa: F401  (the fixture, for the judged replays)

_Q = re.compile(r"What is (-?\d+) \+ (-?\d+)\?")
USAGE = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}


@dataclass
class FakeTeachers:
    delay_s: float = 0.0
    """Added to every answer (to keep calls in flight for a kill test)."""
    calls: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(model, conversation JSON) → requests received."""
    requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def calls_for(self, model: str) -> int:
        return sum(n for (m, _), n in self.calls.items() if m == model)


def _sum(messages: list[dict[str, Any]]) -> int | None:
    text = " ".join(str(m.get("content") or "") for m in messages if m.get("role") == "user")
    found = _Q.findall(text)
    return int(found[-1][0]) + int(found[-1][1]) if found else None


def _reply(model: str, total: int | None, auth: str, first: bool) -> tuple[int, Any]:
    if model == "error500" or (model == "flaky" and first):
        return 500, {"error": "injected"}
    if model == "malformed":
        return 200, {"nothing": "here"}
    if total is None:
        content: Any = "I do not know."
    elif model == "wrong":
        content = f"The answer is {total + 1}."
    elif model == "even":
        content = f"The answer is {total if total % 2 == 0 else total + 1}."
    else:
        content = f"The answer is {total}."
    if model == "non_string":
        content = 42
    if model == "echo":
        content = f"The answer is {total}. You sent {auth}"
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if model == "tool":
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "Bash", "arguments": '{"command": "pytest -q"}'},
                }
            ],
        }
    choice = {"index": 0, "finish_reason": "stop", "message": message}
    return 200, {"id": "x", "object": "chat.completion", "choices": [choice], "usage": USAGE}


def make_app(state: FakeTeachers):
    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            return
        body = b""
        while True:
            msg = await receive()
            body += msg.get("body", b"")
            if not msg.get("more_body"):
                break
        req = json.loads(body or b"{}")
        model = req.get("model", "")
        key = (model, json.dumps(req.get("messages"), sort_keys=True))
        with state.lock:
            first = state.calls[key] == 0
            state.calls[key] += 1
            state.requests.append(req)
        auth = dict(scope["headers"]).get(b"authorization", b"").decode()
        if model == "slow":
            await asyncio.sleep(5)
        if state.delay_s:
            await asyncio.sleep(state.delay_s)
        status, payload = _reply(model, _sum(req.get("messages") or []), auth, first)
        if model == "echo" and status == 200:
            status, payload = (500, {"error": f"bad auth {auth}"}) if first else (status, payload)
        data = json.dumps(payload).encode()
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": data})

    return app


class TeacherServer:
    def __init__(self, state: FakeTeachers) -> None:
        self.state = state
        config = uvicorn.Config(
            make_app(state), host="127.0.0.1", port=0, log_level="error", lifespan="off"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        self.server.should_exit = True
        self.server.force_exit = True
        self.thread.join(10)


@pytest.fixture
def teachers_server() -> Iterator[TeacherServer]:
    server = TeacherServer(FakeTeachers())
    yield server
    server.stop()


def arith_trace(
    i: int, a: int, b: int, *, original_right: bool = True, system: bool = True
) -> Trace:
    """One "What is a + b?" exchange whose step carries a numeric verifier."""
    total = a + b
    said = total if original_right else total + 3
    messages = [Message(role="system", content="Answer briefly.")] if system else []
    messages += [
        Message(role="user", content=f"What is {a} + {b}?"),
        Message(role="assistant", content=f"The answer is {said}."),
    ]
    step = str(len(messages) - 1)
    return Trace(
        source="arith",
        source_id=f"t{i}",
        source_file="traces.jsonl",
        source_lines=[i + 1],
        messages=messages,
        metadata={"verifiers": {step: {"answer": str(total), "scorer": "numeric"}}},
    )


def write_traces(path: Path, traces: list[Trace]) -> Path:
    path.write_text("".join(json.dumps(t.to_json()) + "\n" for t in traces))
    return path


def write_teachers(path: Path, url: str, teachers: list[dict[str, Any]]) -> Path:
    import yaml

    entries = []
    for t in teachers:
        entry = {"name": t["name"], "endpoint": url, "model": t.get("model", t["name"])}
        entry.update({k: v for k, v in t.items() if k not in ("name", "model")})
        entries.append(entry)
    path.write_text(yaml.safe_dump({"teachers": entries}, sort_keys=False))
    return path


@dataclass(frozen=True)
class Kit:
    """Helpers for the tests (importlib import mode cannot import conftest directly)."""

    arith_trace = staticmethod(arith_trace)
    write_traces = staticmethod(write_traces)
    write_teachers = staticmethod(write_teachers)


@pytest.fixture
def kit() -> Kit:
    return Kit()
