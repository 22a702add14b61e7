"""What a new `ManagedService` does with the processes an earlier one left (`managed.py`).

`adopt(found, …)` turns the state file's record into the state to go on with, one log line
per process:

- a process whose pid is gone, or now belongs to another program (its creation time differs),
  is forgotten and never signalled;
- the proxy is adopted when it answers `GET /admin/upstream` with the token it wrote to
  `proxy.token` (and listens on the configured port, unless that is 0); one that is alive but
  does not answer is stopped;
- a server is adopted when it is the adopted proxy's upstream and answers `/health`; any other
  live server — a candidate or an old one from a start or switch a crash interrupted, or one
  whose proxy is gone — is stopped. An adopted server whose adapter name is not the one the
  proxy renames `served_name` to (a hot-load the crash interrupted after the proxy switched)
  takes the proxy's word for its name, and forgets its version, so that the next
  `reserve_champion` completes the hot-load (`hot_load.py`).

`take_lock(folder)` keeps a second `ManagedService` off the same state folder: an flock on
`service.lock`, which the kernel releases when its holder dies (kill -9 included), naming the
holder's pid to whoever is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import IO

import httpx

from tuneloop.errors import InputError
from tuneloop.flywheel.service.processes import (
    PROXY_GRACE_S,
    ProcessRecord,
    ServiceState,
    alive,
    stop_group,
)
from tuneloop.pidlock import hold_pid_lock


def adopt(
    found: ServiceState,
    *,
    host: str,
    port: int,
    grace_s: float,
    log: Callable[[str], None],
    token: str | None = None,
    served_name: str,
) -> ServiceState:
    """Keep what still answers of `found`, stop the rest; `host`/`port` are the settings'
    (an adopted proxy keeps the host it was started with), `token` the proxy's admin token,
    `served_name` the model name clients ask for."""
    host = found.host if found.proxy is not None else host
    state = ServiceState(host=host)
    upstream, models = _adopt_proxy(found, port, log, token)
    if upstream is not None:
        state.proxy = found.proxy
    routed = models.get(served_name, served_name)
    for server in found.servers:
        if not alive(server):
            log(f"forgot server pid {server.pid} (v{server.version}): it is gone")
        elif upstream == server.url(host) and _answers(f"{server.url(host)}/health"):
            log(f"adopted server pid {server.pid} (v{server.version}) on port {server.port}")
            if server.lora_name is not None and server.lora_name != routed:
                log(
                    f"the proxy sends {served_name!r} to its adapter {routed!r}, not "
                    f"{server.lora_name!r} (an interrupted hot-load): its version is re-checked"
                )
                update = {"lora_name": routed, "version": None, "adapter_dir": None}
                server = server.model_copy(update=update)
            state.servers.append(server)
            state.current_port = server.port
        else:
            log(
                f"server pid {server.pid} (v{server.version}) is not the proxy's answering "
                "upstream (left by an interrupted start or switch)"
            )
            _stop_found(server, grace_s, log)
    if state.proxy is not None and state.current() is None:
        log(f"the adopted proxy sends to {upstream}, no server of ours; start() re-serves")
    return state


def _adopt_proxy(
    found: ServiceState, port: int, log: Callable[[str], None], token: str | None
) -> tuple[str | None, dict[str, str]]:
    """The adopted proxy's upstream and the model names it renames, or (None, {}) (the proxy
    was forgotten or stopped)."""
    proxy = found.proxy
    if proxy is None:
        return None, {}
    if not alive(proxy):
        log(f"forgot proxy pid {proxy.pid}: it is gone")
        return None, {}
    upstream, models = None, {}
    try:
        url = f"{proxy.url(found.host)}/admin/upstream"
        answer = httpx.get(url, headers=admin_headers(token), timeout=5.0)
        if answer.status_code == 200:
            found_route = answer.json()
            upstream = str(found_route["upstream"])
            models = {str(k): str(v) for k, v in (found_route.get("models") or {}).items()}
    except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError):
        upstream = None
    if upstream is None or (port and proxy.port != port):
        why = "does not answer" if upstream is None else f"is on port {proxy.port}, not {port}"
        log(f"proxy pid {proxy.pid} {why}; stopping it")
        _stop_found(proxy, PROXY_GRACE_S, log)
        return None, {}
    log(f"adopted proxy pid {proxy.pid} on port {proxy.port} → {upstream}")
    return upstream, models


def read_token(path: Path) -> str | None:
    """The admin token a proxy wrote to `path`; None when there is none (yet)."""
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as err:
        raise InputError(f"{path}: cannot read the proxy's admin token ({err.strerror})") from None


def admin_headers(token: str | None) -> dict[str, str]:
    return {} if token is None else {"authorization": f"Bearer {token}"}


def _stop_found(record: ProcessRecord, grace_s: float, log: Callable[[str], None]) -> None:
    log(f"{record.role} pid {record.pid}: {stop_group(record, None, grace_s)}")


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5.0).status_code == 200
    except httpx.HTTPError:
        return False


class StateLock:
    """The held flock on `service.lock`; `close()` releases it."""

    def __init__(self, fh: IO[str]) -> None:
        self._fh = fh

    def close(self) -> None:
        self._fh.close()  # closing the file releases the flock


def take_lock(folder: Path) -> StateLock:
    """One `ManagedService` per state folder; InputError naming the holder otherwise."""
    path = folder / "service.lock"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fh = path.open("a+", encoding="utf-8")
    except OSError as err:
        raise InputError(f"{path}: cannot create the service lock ({err.strerror})") from None
    hold_pid_lock(
        fh,
        lambda holder: (
            f"{path}: another process manages this service (pid {holder}); stop "
            "it or use another state folder"
        ),
    )
    return StateLock(fh)
