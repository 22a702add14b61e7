"""The demo judge: a deterministic, rubric-following judge process whose errors are known.

Run (stdlib HTTP, loopback by default; the demo's judge.yaml asks port 8011):

    python examples/arith/judge/server.py --port 8011 --error-rate 0.1 --seed 0 \\
        [--prose-rate 0.0] [--position-bias 0.0] [--model arith-judge] [--api-key-env VAR]

An OpenAI-compatible chat endpoint for `tuneloop.scorers.judge`: POST /v1/chat/completions
reads the one user message (a rubric rendered with `rubric.j2` or `pairwise.j2`, whose marker
lines QUESTION:, REFERENCE:, RESPONSE: or RESPONSE A:/RESPONSE B: delimit the parts) and
answers a short reasoning line, then `SCORE: 1` / `SCORE: 0` or `VERDICT: A|B|TIE`
(`verdicts.py` says how, and which answers are wrong). `usage` counts words as tokens. GET
/health, GET /v1/models, and GET /stats (requests answered, for cache tests) are there too.

A request for another model is a 404 and, with `--api-key-env VAR`, one without
`Authorization: Bearer $VAR` a 401 — as a hosted API refuses them. Deliberately not a model:
a judge whose mistakes are chosen by a hash can be calibrated exactly, so the demo shows what
calibration measures against a known truth.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from verdicts import Behaviour, answer  # noqa: E402  (a sibling script, not a package)


class JudgeServer(ThreadingHTTPServer):
    """The HTTP server and what its handlers share."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], behaviour: Behaviour, model: str, key: str | None):
        super().__init__(address, Handler)
        self.behaviour = behaviour
        self.model = model
        self.key = key
        self.requests = 0
        self.lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    server: JudgeServer
    protocol_version = "HTTP/1.1"  # keep-alive: a judge client sends thousands of requests
    disable_nagle_algorithm = True  # headers and body are two writes; don't wait for an ACK

    def log_message(self, *args: object) -> None:  # quiet: the tests start hundreds of calls
        pass

    def do_GET(self) -> None:
        if self.path == "/health":
            self._send(200, {"status": "ok"})
        elif self.path.rstrip("/") in ("/v1/models", "/models"):
            card = {"id": self.server.model, "object": "model", "owned_by": "tuneloop-demo"}
            self._send(200, {"object": "list", "data": [card]})
        elif self.path == "/stats":
            self._send(200, {"requests": self.server.requests})
        else:
            self._error(404, f"no route {self.path}")

    def do_POST(self) -> None:
        # the body is read before any refusal: on a kept-alive connection, unread bytes would
        # be taken for the next request
        length = self.headers.get("Content-Length") or "0"
        raw = self.rfile.read(int(length) if length.isdigit() else 0)
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._error(404, f"no route {self.path}")
            return
        if self.server.key and self.headers.get("Authorization") != f"Bearer {self.server.key}":
            self._error(401, "invalid API key")
            return
        try:
            body = json.loads(raw)
            content = _user_message(body)
        except (ValueError, TypeError, KeyError) as err:
            self._error(400, f"bad request: {err}")
            return
        if body.get("model") != self.server.model:
            self._error(404, f"model {body.get('model')!r} does not exist")
            return
        seed = body.get("seed") if isinstance(body.get("seed"), int) else None
        text = answer(content, self.server.behaviour, seed)
        with self.server.lock:
            self.server.requests += 1
        self._send(200, _completion(self.server.model, content, text))

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        self._send(status, {"error": {"message": message, "code": status}})


def _user_message(body: Any) -> str:
    """The last user message's text; ValueError when there is none."""
    messages = body["messages"]
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    if not users or not isinstance(users[-1].get("content"), str):
        raise ValueError("expected a user message with text content")
    return str(users[-1]["content"])


def _completion(model: str, prompt: str, text: str) -> dict[str, Any]:
    prompt_tokens, completion_tokens = len(prompt.split()), len(text.split())
    return {
        "id": f"chatcmpl-judge-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _rate(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1], got {text}")
    return value


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8011)
    parser.add_argument("--model", default="arith-judge", help="the model id it answers to")
    parser.add_argument("--seed", type=int, default=0, help="which inputs it gets wrong")
    parser.add_argument("--error-rate", type=_rate, default=0.1, help="verdicts flipped")
    parser.add_argument("--prose-rate", type=_rate, default=0.0, help="answers in prose")
    parser.add_argument("--position-bias", type=_rate, default=0.0, help="pairwise: say A")
    parser.add_argument("--api-key-env", help="require `Bearer $VAR` (401 otherwise)")
    args = parser.parse_args(argv)
    key = os.environ.get(args.api_key_env) if args.api_key_env else None
    if args.api_key_env and not key:
        parser.error(f"--api-key-env: environment variable {args.api_key_env} is not set")
    behaviour = Behaviour(args.seed, args.error_rate, args.prose_rate, args.position_bias)
    server = JudgeServer((args.host, args.port), behaviour, args.model, key)
    host, port = server.server_address[:2]
    print(f"demo judge {args.model!r} on http://{host!s}:{port} ({behaviour})", file=sys.stderr)
    sys.stderr.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
