"""The managed service's processes and its state file: spawn, wait, recognise, stop.

Used by `managed.py` (`ManagedService`); nothing here knows about champions or switching.

- `ServiceState` (`service.json` in the service's state folder, written atomically after every
  step): the proxy and the servers this service started, each as a `ProcessRecord` with pid,
  creation time (so that a reused pid is never taken for ours), port and log.
- `spawn_detached`: a new session and process group, output appended to a log, and — unlike
  `serve.lifecycle.spawn` for the loop's servers — *no* parent-death signal: the service must
  outlive a watcher that restarts, which then adopts it.
- `wait_proxy`: the proxy has bound (port file) and its `/health` is 200, which means the
  upstream answered its own `/health`; no completion goes through the proxy, so a probe never
  lands in the traffic log the flywheel trains on. (The servers' readiness is the loop's own
  `serve.lifecycle.wait_ready`: health plus one real completion.)
- `stop_group`: SIGTERM the process group, SIGKILL it after a grace period, and wait until
  no member is left. It works for a child of this process (reaped) and for one a previous
  watcher left (adopted; reaped by init, or by us if we are still its parent).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Literal

import httpx
from pydantic import BaseModel, ConfigDict

from tuneloop.errors import InputError, PhaseFailed
from tuneloop.records import atomic_write_text
from tuneloop.serve.lifecycle import EXIT_BIND, client_host, group_alive, log_tail

STATE_FILE = "service.json"
STATE_SCHEMA = 1
EXIT_USAGE = 2  # `tuneloop proxy` refused an option before binding
PROXY_GRACE_S = 35.0
"""The proxy gives in-flight requests 30 s after SIGTERM (`run_proxy`); a little more here."""


class ProcessRecord(BaseModel):
    """One process the service started."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["proxy", "server"]
    pid: int
    """Also its process group id (it leads a new session)."""
    created: float
    """The process's creation time (psutil), so that a reused pid is not mistaken for it."""
    port: int
    log: str
    """Where its stdout and stderr are appended."""
    model_dir: str | None = None
    """Servers: the checkpoint folder served."""
    adapter_dir: str | None = None
    """Servers: the LoRA adapter served on `model_dir`, if any."""
    lora_name: str | None = None
    """Servers: the name the server knows that adapter by, for a vLLM server that takes new
    adapters at runtime (`hot_load.py`); clients ask for `served_name`, which the proxy
    renames to this unless the two are the same."""
    max_lora_rank: int | None = None
    """Servers: the largest LoRA rank it was started to hold (`--max-lora-rank`)."""
    version: int | None = None
    """Servers: the champion version it serves."""

    def url(self, host: str) -> str:
        """Its base URL without `/v1` (the form the proxy's admin routes use)."""
        return f"http://{client_host(host)}:{self.port}"


class ServiceState(BaseModel):
    """What `service.json` holds."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = STATE_SCHEMA
    host: str = "127.0.0.1"
    """Where the processes listen (both the proxy and the servers)."""
    proxy: ProcessRecord | None = None
    servers: list[ProcessRecord] = []
    """Every server alive or starting: the current one, a candidate, an old one draining."""
    current_port: int | None = None
    """The port of the server the proxy sends to."""

    def current(self) -> ProcessRecord | None:
        return next((s for s in self.servers if s.port == self.current_port), None)


def load_state(folder: Path) -> ServiceState:
    """The state left in `folder` (empty when there is none); InputError for an unreadable
    one, naming the file and what to do."""
    path = folder / STATE_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ServiceState()
    except OSError as err:
        raise InputError(f"{path}: cannot read the service state ({err.strerror})") from None
    try:
        state = ServiceState.model_validate_json(text)
    except ValueError as err:
        raise InputError(
            f"{path}: not a service state file ({str(err).splitlines()[0]}); stop the "
            "processes it named by hand, then remove it"
        ) from None
    if state.schema_version != STATE_SCHEMA:
        raise InputError(
            f"{path}: service state schema {state.schema_version}, this tuneloop reads "
            f"{STATE_SCHEMA}; stop the service with the tuneloop that started it"
        )
    return state


def save_state(folder: Path, state: ServiceState) -> None:
    atomic_write_text(folder / STATE_FILE, state.model_dump_json(indent=2) + "\n")


def created_at(pid: int) -> float:
    import psutil

    return float(psutil.Process(pid).create_time())


def alive(record: ProcessRecord) -> bool:
    """True when `record`'s process still runs (same pid *and* creation time, not a zombie)."""
    import psutil

    try:
        proc = psutil.Process(record.pid)
        if abs(proc.create_time() - record.created) > 0.01:
            return False  # the pid was reused by someone else
        return bool(proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def spawn_detached(
    argv: list[str], log: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start `argv` in its own session (pid = process group id), output appended to `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def read_port(port_file: Path) -> int | None:
    try:
        return int(port_file.read_text().strip())
    except (OSError, ValueError):
        return None


def wait_port(proc: subprocess.Popen[bytes], port_file: Path, log: Path, timeout_s: float) -> int:
    """The port a process writes to `port_file` once it has bound; raises if it dies first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        port = read_port(port_file)
        if port is not None:
            return port
        if proc.poll() is not None:
            raise died(proc, log)
        time.sleep(0.05)
    raise PhaseFailed(f"no port written to {port_file} within {timeout_s:g} s; see {log}")


def wait_proxy(
    proc: subprocess.Popen[bytes], port_file: Path, log: Path, host: str, timeout_s: float
) -> int:
    """Wait until the proxy has bound and its /health is 200; returns its port."""
    deadline = time.monotonic() + timeout_s
    port = wait_port(proc, port_file, log, timeout_s)
    last = "no answer yet"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise died(proc, log)
        try:
            answer = httpx.get(f"http://{host}:{port}/health", timeout=2.0)
            if answer.status_code == 200:
                return port
            last = f"HTTP {answer.status_code}: {answer.text[:300]}"
        except httpx.HTTPError as err:
            last = f"{type(err).__name__}: {err}"
        time.sleep(0.1)
    raise PhaseFailed(
        f"the proxy did not become healthy within {timeout_s:g} s ({last}); "
        f"last lines of {log}:\n{log_tail(log)}"
    )


def died(proc: subprocess.Popen[bytes], log: Path) -> Exception:
    """The error for a process that exited during startup, with its last log lines."""
    tail = log_tail(log)
    if proc.returncode == EXIT_BIND:
        return InputError(f"cannot bind the port (is it in use?); last lines of {log}:\n{tail}")
    kind = InputError if proc.returncode == EXIT_USAGE else PhaseFailed
    return kind(
        f"exited with status {proc.returncode} during startup; last lines of {log}:\n{tail}"
    )


def _reap(pid: int, child: subprocess.Popen[bytes] | None) -> None:
    """Collect the leader's exit status if it is our child (else init does)."""
    if child is not None:
        child.poll()
        return
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def _wait_group_gone(pid: int, child: subprocess.Popen[bytes] | None, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        _reap(pid, child)
        if not group_alive(pid):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def stop_group(record: ProcessRecord, child: subprocess.Popen[bytes] | None, grace_s: float) -> str:
    """Stop `record`'s process group and wait until it is gone; says how it went."""
    if child is None and not alive(record):
        return "already gone"
    with contextlib.suppress(ProcessLookupError):
        os.killpg(record.pid, signal.SIGTERM)
    if _wait_group_gone(record.pid, child, grace_s):
        return "stopped (SIGTERM)"
    with contextlib.suppress(ProcessLookupError):
        os.killpg(record.pid, signal.SIGKILL)
    if _wait_group_gone(record.pid, child, grace_s):
        return f"killed (SIGKILL after {grace_s:g} s)"
    raise PhaseFailed(
        f"{record.role} pid {record.pid} survived SIGKILL for {grace_s:g} s "
        f"(stuck in the kernel?); check it with `ps -g {record.pid}`"
    )
