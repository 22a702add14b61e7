"""Serving phase: put a model behind an OpenAI-compatible endpoint for as long as it is needed.

    with serving("examples/arith/model") as ep:          # embedded FastAPI + transformers
        client = openai.OpenAI(base_url=ep.base_url, api_key=ep.api_key or "none")
        client.chat.completions.create(model=ep.model, messages=[...])

`serving(model, backend, ...)` looks the backend up by name in the `serve_backends` registry
(`embedded`, `vllm`, `external`, or a plugin) and yields an `Endpoint` once the server answers
a health check and one real completion; on exit the server's whole process group is gone.
`options` carries the backend's settings named exactly as in loop.yaml's `serve` section
(embedded: max_batch_size, batch_wait_ms, max_tokens_cap, api_key_env; vllm: the `serve.vllm`
keys; external: the `serve.external` keys). Nothing heavy is imported here.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Endpoint", "serving"]


@dataclass(frozen=True)
class Endpoint:
    """A running OpenAI-compatible server."""

    base_url: str
    """Base URL ending in /v1."""
    model: str
    """Served model name to put in requests."""
    api_key: str | None
    """Bearer key for the client (read from the env var the config names); never written."""
    pid: int | None
    """The server's process group leader; None for an external endpoint."""

    def __repr__(self) -> str:  # keep the key out of logs and tracebacks
        key = "set" if self.api_key else None
        return (
            f"Endpoint(base_url={self.base_url!r}, model={self.model!r}, api_key={key}, "
            f"pid={self.pid})"
        )


@contextmanager
def serving(
    model: str | Path,
    backend: str = "embedded",
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    startup_timeout_s: float = 300.0,
    log_path: Path | None = None,
    options: dict[str, Any] | None = None,
) -> Iterator[Endpoint]:
    """Serve `model` with `backend` for the duration of the `with` block."""
    from tuneloop.registry import serve_backends

    start = serve_backends.get(backend)
    with start(
        model,
        host=host,
        port=port,
        startup_timeout_s=startup_timeout_s,
        log_path=log_path,
        options=dict(options or {}),
    ) as endpoint:
        yield endpoint
