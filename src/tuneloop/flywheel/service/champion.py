"""The watcher's managed champion service: `flywheel.serve.managed: true`, wired in one place.

`tuneloop watch` builds it when the config asks for it: the bootstrap champion is registered
if the ledger has none (so users are served before the first round), the champion is served
behind `tuneloop proxy` on `flywheel.serve.port` (`managed.py`), and after every promoted round
`reserve()` switches to the new champion without downtime (`reserve.py`). On exit the service
is left serving — the address clients use outlives a watcher restart, which adopts it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tuneloop.config import LoopConfig
from tuneloop.config.flywheel import FlywheelConfig
from tuneloop.errors import InputError
from tuneloop.flywheel.paths import FlywheelPaths
from tuneloop.flywheel.service.managed import ManagedService
from tuneloop.flywheel.service.reserve import reserve_champion
from tuneloop.flywheel.service.settings import ServiceSettings


class ChampionService:
    """A `ManagedService` plus the ledger it follows."""

    def __init__(self, service: ManagedService, ledger: Path) -> None:
        self.service = service
        self.ledger = ledger

    def reserve(self) -> str:
        """Serve the ledger's champion (start, switch or nothing); one line saying which."""
        done = reserve_champion(self.service, self.ledger)
        url = self.service.status().url
        if done.action == "unchanged":
            return f"champion v{done.version} already served at {url}"
        before = f" (was v{done.previous})" if done.previous else ""
        return f"champion v{done.version} {done.action}{before} at {url} in {done.seconds:.1f} s"

    def close(self) -> None:
        self.service.close()


MANAGED_BACKENDS = ("embedded", "vllm")
"""The backends the managed service can start and re-serve (an external endpoint is someone
else's to re-serve)."""


def managed_service(
    cfg: LoopConfig, flywheel: FlywheelConfig, ledger: Path | None
) -> ChampionService | None:
    """The champion service when `flywheel.serve.managed`, else None."""
    from tuneloop.loop.rounds import ensure_champion

    serve = flywheel.serve
    if not serve.managed:
        return None
    if ledger is None:
        raise InputError("flywheel.serve.managed needs the gate ledger (gate.ledger)")
    if cfg.serve.backend not in MANAGED_BACKENDS:
        raise InputError(
            f"flywheel.serve.managed starts the champion's server itself: serve.backend must be "
            f"one of {', '.join(MANAGED_BACKENDS)} (got {cfg.serve.backend!r})"
        )
    log_dir = traffic_dir(flywheel)
    assert log_dir is not None
    ensure_champion(cfg)
    settings = ServiceSettings(
        state_dir=FlywheelPaths(cfg.workdir).service,
        port=serve.port,
        log_dir=log_dir,
        served_name=serve.served_name,
        server=cfg.serve,
        startup_timeout_s=cfg.serve.startup_timeout_s,
    )
    return ChampionService(ManagedService(settings, log=_stderr), ledger)


def traffic_dir(flywheel: FlywheelConfig) -> Path | None:
    """The managed proxy's traffic-log folder, created (None when the service is not managed):
    `flywheel.serve.log_dir`, else the first `flywheel.traffic` entry."""
    serve = flywheel.serve
    if not serve.managed:
        return None
    log_dir = serve.log_dir or (flywheel.traffic[0] if flywheel.traffic else None)
    if log_dir is None or log_dir.suffix == ".jsonl":
        raise InputError(
            "flywheel.serve.log_dir: the proxy needs a folder for its traffic log; set it, "
            "or make the first flywheel.traffic entry a folder"
        )
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"flywheel.serve.log_dir: {log_dir}: {err.strerror or err}") from None
    return log_dir


def _stderr(line: str) -> None:
    print(f"service: {line}", file=sys.stderr, flush=True)
