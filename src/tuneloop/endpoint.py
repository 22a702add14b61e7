"""The serving contract: what a backend is asked (`Decoding`, the `Arm`), what it hands back
(`Endpoint`), and the `ServeBackend` protocol every backend in `serve_backends` follows.

`tuneloop.serving.serving()` is how it is used; the built-in backends are
`tuneloop.serve.backends`. Plain data and a Protocol: this module imports only the config
models, so the registry and any phase may name these types.

Pre and post must be served alike, so a backend is told the arm it serves (`arm="pre"|"post"`:
the external backend serves a different model per arm) and one `Decoding` contract that the
loop derives once from the base checkpoint and passes for both arms: its stop token ids replace
each checkpoint's own generation-config eos ids (embedded: `--stop-token-ids`; vLLM: a
`--generation-config` folder written from the contract). A base whose generation config stops
on the wrong token would otherwise run to max_tokens while the merged checkpoint, whose config
merge repaired, stops: a Δ made by decoding, not by training. An external endpoint decodes as
its owner set it up; the contract cannot reach it (`Endpoint.decoding_applied` is False) and
the summary records that.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from tuneloop.config import ServeConfig

__all__ = ["Arm", "Decoding", "Endpoint", "ServeBackend"]

Arm = Literal["pre", "post"]

LENGTH_KEYS = frozenset({"max_new_tokens", "max_length", "min_new_tokens", "min_length"})
"""Generation-config keys a served contract leaves to each request (`served_generation_config`)."""


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
        """The generation_config.json every arm is served with. Its length limits are left
        out: vLLM makes a generation config's `max_new_tokens` a server-wide cap on every
        request's `max_tokens` (measured: the demo checkpoint's 8 cut each 96-token agent
        turn to 8 tokens, `finish_reason: length`), where the embedded server and the eval
        let the request's own `max_tokens` govern."""
        kept = {k: v for k, v in self.generation_config.items() if k not in LENGTH_KEYS}
        return {**kept, "eos_token_id": list(self.stop_token_ids)}


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


class ServeBackend(Protocol):
    """A serving backend as registered in `serve_backends`: a context-manager factory that
    serves `model` under the `serve` section `config` until the `with` block ends. A backend
    that can serve a LoRA adapter on `model` without merging also takes `adapter: Path | None`
    (`tuneloop.serving.serving` passes it only to those)."""

    def __call__(
        self,
        model: str | Path,
        config: ServeConfig,
        *,
        log_path: Path | None,
        arm: Arm | None,
        decoding: Decoding | None,
    ) -> AbstractContextManager[Endpoint]: ...
