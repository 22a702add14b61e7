"""A fake judge (shared by tests/scorers/judge, tests/evaluate and the shadow tests): an
OpenAI-compatible chat endpoint (stdlib HTTP server in a thread) whose answer is a function of
the rendered rubric, plus a judge file pointing at it.

`FakeJudge.answer(content) -> (status, text)` decides each reply; the default grades
`RESPONSE: <n>` against `REFERENCE: <n>` ("SCORE: 1" or "SCORE: 0"), and pairwise rubrics
(`RESPONSE A:` / `RESPONSE B:`) prefer the larger number. Every request's body is kept.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

GRADE_RUBRIC = (
    "Grade the answer.\nQUESTION:\n{{ prompt }}\nREFERENCE: {{ reference }}\n"
    "RESPONSE: {{ response }}\n"
)
PAIR_RUBRIC = (
    "Which is better?\nQUESTION:\n{{ prompt }}\nRESPONSE A: {{ response_a }}\n"
    "RESPONSE B: {{ response_b }}\n"
)


def _number(label: str, content: str) -> str | None:
    found = re.search(rf"^{label}: (.*)$", content, re.M)
    return found.group(1).strip() if found else None


def last_number(text: str | None) -> float | None:
    found = re.findall(r"-?\d+(?:\.\d+)?", text or "")
    return float(found[-1]) if found else None


def honest(content: str) -> tuple[int, str]:
    if "RESPONSE A:" in content:
        a, b = _number("RESPONSE A", content), _number("RESPONSE B", content)
        if a == b:
            return 200, "Same.\nVERDICT: TIE"
        better_a = (last_number(a) or 0) > (last_number(b) or 0)
        return 200, "Larger wins.\nVERDICT: " + ("A" if better_a else "B")
    right = last_number(_number("RESPONSE", content)) == last_number(_number("REFERENCE", content))
    return 200, "Checked.\nSCORE: " + ("1" if right else "0")


@dataclass
class FakeJudge:
    url: str = ""
    answer: Callable[[str], tuple[int, str]] = honest
    bodies: list[dict] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def calls(self) -> int:
        return len(self.bodies)


def _handler(state: FakeJudge) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            body["_auth"] = self.headers.get("Authorization")
            with state.lock:
                state.bodies.append(body)
            status, text = state.answer(body["messages"][0]["content"])
            reply = (
                {
                    "choices": [{"message": {"role": "assistant", "content": text}}],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 10},
                }
                if status == 200
                else {"error": {"message": text}}
            )
            data = json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


@pytest.fixture
def fake_judge() -> Iterator[FakeJudge]:
    state = FakeJudge()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


def write_judge(folder: Path, url: str, *, mode: str = "grade", **extra: object) -> Path:
    """A judge file (and its rubric) in `folder`, asking `url`."""
    folder.mkdir(parents=True, exist_ok=True)
    rubric = folder / f"{mode}.j2"
    rubric.write_text(GRADE_RUBRIC if mode == "grade" else PAIR_RUBRIC)
    lines = [
        f"endpoint: {url}",
        "model: fake-judge",
        f"rubric: {rubric.name}",
        f"mode: {mode}",
        "backoff_s: 0",
        "price: {input_per_1m: 1.0, output_per_1m: 10.0}",
    ] + [f"{k}: {json.dumps(v)}" for k, v in extra.items()]
    path = folder / "judge.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path
