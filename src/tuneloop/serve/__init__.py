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

Pre and post must be served alike, so `serving` takes the arm it serves (`arm="pre"|"post"`:
the external backend serves a different model per arm) and one `Decoding` contract that the
loop derives once from the base checkpoint and passes for both arms: its stop token ids replace
each checkpoint's own generation-config eos ids (embedded: `--stop-token-ids`; vLLM: a
`--generation-config` folder written from the contract). A base whose generation config stops
on the wrong token would otherwise run to max_tokens while the merged checkpoint, whose config
merge repaired, stops: a Δ made by decoding, not by training. An external endpoint decodes as
its owner set it up; the contract cannot reach it and the summary records that.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = ["Arm", "Decoding", "Endpoint", "serving"]

Arm = Literal["pre", "post"]


@dataclass(frozen=True)
class Decoding:
    """How every arm of one comparison decodes, whatever its own checkpoint metadata says."""

    stop_token_ids: tuple[int, ...]
    """Tokens that end a completion (finish_reason `stop`); they replace the served
    checkpoint's generation-config eos ids."""
    generation_config: dict[str, Any] = field(default_factory=dict)
    """The base checkpoint's generation config (vLLM takes sampling defaults from it); its
    `eos_token_id` is replaced by `stop_token_ids` when it is served."""

    def served_generation_config(self) -> dict[str, Any]:
        """The generation_config.json every arm is served with."""
        return {**self.generation_config, "eos_token_id": list(self.stop_token_ids)}


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
    identity: str | None = None
    """The model identity for sample logs when the backend knows it better than the caller
    (external: the served model name); None means the weights the caller asked to serve."""
    decoding_applied: bool = False
    """Whether the `Decoding` contract passed to `serving` governs this endpoint."""
    replicas: tuple[str, ...] = ()
    """Further base URLs serving the same model (an external arm's `replicas`); an eval
    spreads its requests over `base_url` and these."""

    def __repr__(self) -> str:  # keep the key out of logs and tracebacks
        key = "set" if self.api_key else None
        return (
            f"Endpoint(base_url={self.base_url!r}, model={self.model!r}, api_key={key}, "
            f"pid={self.pid}, identity={self.identity!r})"
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
    arm: Arm | None = None,
    decoding: Decoding | None = None,
) -> Iterator[Endpoint]:
    """Serve `model` with `backend` for the duration of the `with` block.

    `arm` says which side of a comparison this is (the external backend needs it); `decoding`
    is the contract both arms are served under (None: the checkpoint's own metadata).
    """
    from tuneloop.registry import serve_backends

    start = serve_backends.get(backend)
    with start(
        model,
        host=host,
        port=port,
        startup_timeout_s=startup_timeout_s,
        log_path=log_path,
        options=dict(options or {}),
        arm=arm,
        decoding=decoding,
    ) as endpoint:
        yield endpoint
