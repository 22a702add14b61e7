"""What a managed service is told (`ServiceSettings`) and what it reports (`ServiceStatus`).

Plain values, shared by `managed.py` (the service), `server_command.py` (a server's command
line) and the config layer that unpacks `flywheel.serve` and `serve:` into them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tuneloop.config.flywheel import ServeChampionConfig
from tuneloop.config.models import ServeConfig


@dataclass(frozen=True)
class ServiceSettings:
    """Where the service lives and how it serves (plain values; the config layer unpacks).
    The defaults are the config's (`flywheel.serve`, `serve:`), not written again here."""

    state_dir: Path
    """service.json, service.lock, the port files and the processes' logs."""
    port: int = ServeChampionConfig.model_fields["port"].default
    """The proxy's port (`flywheel.serve.port`): the address clients keep. 0 picks a free
    one (stable only for the proxy's lifetime)."""
    host: str = "127.0.0.1"
    log_dir: Path | None = None
    """The proxy's traffic log folder (`tuneloop proxy --log-dir`); None logs nothing."""
    served_name: str = ServeChampionConfig.model_fields["served_name"].default
    """The model name clients request, whatever the champion is (`flywheel.serve.served_name`)."""
    server: ServeConfig = ServeConfig()
    """How each champion is served (loop.yaml's `serve:` section): `serve.backend` embedded
    (its settings, e.g. threads, max_batch_size) or vllm (`serve.vllm`, from the vLLM
    environment)."""
    startup_timeout_s: float = ServeConfig.model_fields["startup_timeout_s"].default
    """Longest wait for a server to become ready (`serve.startup_timeout_s`)."""
    drain_timeout_s: float = 60.0
    """Longest wait for the old server's in-flight requests before it is stopped anyway."""
    stop_grace_s: float = 10.0
    """SIGTERM → SIGKILL grace for a server."""


@dataclass(frozen=True)
class ServiceStatus:
    running: bool
    """A proxy is up and sends to a server of ours."""
    url: str | None
    """The clients' base URL (…/v1)."""
    model: str
    """The model name clients request."""
    version: int | None
    model_dir: str | None
    adapter_dir: str | None
    """The LoRA adapter served on `model_dir` (an adapter champion), else None."""
    upstream: str | None
    """The current server's base URL."""
    proxy_pid: int | None
    server_pid: int | None
