"""A fake OpenAI-compatible server (uvicorn in a thread, port 0) and a fault-injecting proxy.

The server answers "What is A + B?" prompts: correctly when (A + B) % 3 != 0, with A + B + 1
otherwise, so every score is predictable from the item alone. Knobs on `FakeState` inject
500s, delays, malformed bodies and non-string completions.

`agent_server` is a scripted agent model for the agent suite in `fixtures/agent_suite.jsonl`:
its reply is a pure function of the conversation so far (`scripted_turn`), so trajectories
are exact; a `[mode]` in the user's question picks the misbehaviour (bad JSON, an unknown
tool, wrong arguments, a failing call, a repeated call, never answering).
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import uvicorn

from ..judge_fixture import fake_judge  # noqa: F401  (a fixture for the judged evals)

_Q = re.compile(r"What is (-?\d+) \+ (-?\d+)\?")


def expected_reply(prompt: str) -> str:
    m = _Q.search(prompt)
    if not m:
        return "I do not know."
    total = int(m.group(1)) + int(m.group(2))
    return f"The answer is {total if total % 3 else total + 1}."


def expected_score(prompt: str) -> float:
    m = _Q.search(prompt)
    return 1.0 if m and (int(m.group(1)) + int(m.group(2))) % 3 else 0.0


@dataclass
class FakeState:
    error_rate: float = 0.0
    """Probability of answering 500 (before doing anything else)."""
    delay_s: float = 0.0
    malformed: set[str] = field(default_factory=set)
    """Prompts answered with a body that is not a completion."""
    non_string: set[str] = field(default_factory=set)
    """Prompts answered with `content: 42` (a number, not text)."""
    refuse: bool = False
    """Answer every request with 404 (wrong model name)."""
    echo_auth: tuple[int, str] | None = None
    """(status, body template): answer with that status and the template with `{auth}`
    replaced by the request's Authorization header, as careless servers do."""
    requests: int = 0
    seeds: list[tuple[str, int]] = field(default_factory=list)
    rng: random.Random = field(default_factory=lambda: random.Random(1))


def make_app(state: FakeState):
    async def app(scope, receive, send):  # a bare ASGI app: fast, and no FastAPI needed
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            msg = await receive()
            body += msg.get("body", b"")
            if not msg.get("more_body"):
                break
        if state.echo_auth is not None:
            headers = dict(scope["headers"])
            code, template = state.echo_auth
            auth = headers.get(b"authorization", b"").decode()
            await _send(send, code, template.replace("{auth}", auth).encode())
            return
        status, payload = await _answer(state, scope["path"], json.loads(body or b"{}"))
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": payload})

    return app


async def _send(send, status: int, payload: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": payload})


async def _answer(state: FakeState, path: str, req: dict) -> tuple[int, bytes]:
    state.requests += 1
    if state.delay_s:
        await asyncio.sleep(state.delay_s)
    if state.refuse:
        return 404, b'{"error": "model not found"}'
    if state.rng.random() < state.error_rate:
        return 500, b'{"error": "injected"}'
    chat = path.endswith("/chat/completions")
    prompt = req["messages"][-1]["content"] if chat else req["prompt"]
    state.seeds.append((prompt, req.get("seed")))
    if prompt in state.malformed:
        return 200, b'{"nothing": "here"}'
    text: object = 42 if prompt in state.non_string else expected_reply(prompt)
    choice = {
        "index": 0,
        "finish_reason": "stop",
        **({"message": {"role": "assistant", "content": text}} if chat else {"text": text}),
    }
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    return 200, json.dumps(
        {"id": "x", "object": "chat.completion", "choices": [choice], "usage": usage}
    ).encode()


class ServerThread:
    """uvicorn in a background thread; stop() and start() again on the same port."""

    def __init__(self, state, port: int = 0, app=None) -> None:
        self.state, self.port = state, port
        self.app = app or make_app(state)
        self.start()

    def start(self) -> None:
        config = uvicorn.Config(
            self.app,
            host="127.0.0.1",
            port=self.port,
            log_level="error",
            lifespan="off",
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]

    def stop(self) -> None:
        self.server.should_exit = True
        self.server.force_exit = True
        self.thread.join(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


class DroppingProxy:
    """A TCP proxy that closes the connection instead of forwarding ~`drop_rate` of requests."""

    def __init__(self, upstream_port: int, drop_rate: float, seed: int = 7) -> None:
        self.upstream_port, self.drop_rate = upstream_port, drop_rate
        self.rng = random.Random(seed)
        self.dropped = 0
        self.loop = asyncio.new_event_loop()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self.sock = sock
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(
            asyncio.start_server(self._handle, sock=self.sock)
        )
        self.loop.run_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            return

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, drop: bool) -> None:
            try:
                while data := await src.read(65536):
                    if drop and self.rng.random() < self.drop_rate:
                        self.dropped += 1
                        break
                    dst.write(data)
                    await dst.drain()
            except OSError:
                pass
            finally:
                writer.close()
                up_w.close()

        await asyncio.gather(pipe(reader, up_w, True), pipe(up_r, writer, False))

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
def fake_server() -> Iterator[ServerThread]:
    server = ServerThread(FakeState())
    yield server
    server.stop()


@pytest.fixture
def small_suite(tmp_path: Path) -> Path:
    """24 chat items and 6 prompt items of the arith shape."""
    rows = []
    for i in range(30):
        a, b = i * 7 % 50, i * 13 % 40
        q = f"What is {a} + {b}?"
        body = {"messages": [{"role": "user", "content": q}]} if i < 24 else {"prompt": q}
        rows.append(
            {
                "id": f"add-{i:04d}",
                **body,
                "answer": str(a + b),
                "tags": ["add", "even" if i % 2 == 0 else "odd"],
            }
        )
    path = tmp_path / "suite.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# ---- a scripted agent model ------------------------------------------------------------

AGENT_SUITE = Path(__file__).parent / "fixtures" / "agent_suite.jsonl"
_COMPUTE = re.compile(r"Compute: (?P<expr>[^\[]+?)\s*(?:\[(?P<mode>[\w-]+)\])?$")


@dataclass
class AgentState:
    delay_s: float = 0.0
    error_rate: float = 0.0
    """Probability of a 500 before answering (an infrastructure fault, retried)."""
    requests: list[tuple[str, int, int]] = field(default_factory=list)
    """(last user question, turn, seed) of every answered request."""
    rng: random.Random = field(default_factory=lambda: random.Random(3))


def _call(n: int, name: str, arguments: object) -> dict:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": raw}}


def scripted_turn(messages: list[dict], tools: list[str]) -> dict:
    """The assistant message the scripted model sends next."""
    question = [m for m in messages if m["role"] == "user"][-1]["content"]
    results = [m["content"] for m in messages if m["role"] == "tool"]
    n = len(results)

    def calls(*made: dict) -> dict:
        return {"role": "assistant", "content": None, "tool_calls": list(made)}

    def answer(text: str) -> dict:
        return {"role": "assistant", "content": text}

    if not tools:
        return answer(expected_reply(question))
    if "weather" in tools:
        if n == 0:
            return calls(_call(0, "weather", {"city": "Paris"}))
        return answer(f"It is {json.loads(results[-1])['temperature_c']} C in Paris.")
    m = _COMPUTE.search(question)
    assert m, question
    expr, mode = m.group("expr"), m.group("mode")
    good = _call(n, "calculator", {"expression": expr})
    first = {
        "bad-json": _call(0, "calculator", '{"expression": "' + expr),
        "unknown": _call(0, "calc", {"expression": expr}),
        "wrong-args": _call(0, "calculator", {"expr": expr}),
    }
    if mode == "loop" or (mode == "redundant" and n < 2):
        return calls(good)
    if n == 0:
        return calls(first.get(mode or "", good))
    if mode in first and n == 1:
        return calls(good)
    return answer(f"The answer is {results[-1]}." if mode != "fail" else "The answer is 0.")


def make_agent_app(state: AgentState):
    async def app(scope, receive, send):
        body = b""
        while True:
            msg = await receive()
            body += msg.get("body", b"")
            if not msg.get("more_body"):
                break
        if state.delay_s:
            await asyncio.sleep(state.delay_s)
        if state.rng.random() < state.error_rate:
            await _send(send, 500, b'{"error": "injected"}')
            return
        req = json.loads(body)
        messages = req["messages"]
        tools = [t["function"]["name"] for t in req.get("tools", [])]
        question = [m for m in messages if m["role"] == "user"][-1]["content"]
        turn = sum(1 for m in messages if m["role"] == "assistant")
        state.requests.append((question, turn, req.get("seed")))
        message = scripted_turn(messages, tools)
        choice = {
            "index": 0,
            "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
            "message": message,
        }
        usage = {"prompt_tokens": 10 * len(messages), "completion_tokens": 5}
        await _send(send, 200, json.dumps({"choices": [choice], "usage": usage}).encode())

    return app


@pytest.fixture
def agent_server() -> Iterator[ServerThread]:
    state = AgentState()
    server = ServerThread(state, app=make_agent_app(state))
    yield server
    server.stop()


@dataclass(frozen=True)
class FakeKit:
    """The helpers tests need (importlib import mode cannot import conftest directly)."""

    expected_score = staticmethod(expected_score)
    FakeState = FakeState
    ServerThread = ServerThread
    DroppingProxy = DroppingProxy
    AGENT_SUITE = AGENT_SUITE
    scripted_turn = staticmethod(scripted_turn)


@pytest.fixture
def kit() -> FakeKit:
    return FakeKit()
