"""Start a server process, wait until it really answers, and take it down with all it spawned.

`launched(launch)` is the context manager the process backends (embedded, vllm) share:

1. spawn the command in its own session and process group (`start_new_session=True`), stdout
   and stderr appended to the log file, with `PR_SET_PDEATHSIG` set in the child so that it is
   killed if this process dies — even by SIGKILL, when no `finally` runs;
2. wait, up to the startup timeout, for `/health` to answer 200 and then for one real chat
   completion to succeed; a process that exits meanwhile, or a timeout, raises at once with the
   server's last log lines (a busy port is an `InputError`, everything else `PhaseFailed`);
3. on exit, SIGTERM the whole group, SIGKILL it after a grace period, and wait until no
   member is left, so that the memory is free before the next phase starts. A server that
   exited by itself while it was in use (killed, out of memory) fails its user's block with
   `PhaseFailed` and its log's last lines, even when the block itself ended quietly: an eval
   whose server died has `missing` rows, which a rerun fills in (never scored as failures of
   the model).

The server's side of the same hygiene is here too, so that both ends agree on it: `bind`
(the socket bound before the model loads) and `EXIT_BIND` (the status of a busy port), used by
the embedded server (`embedded/server.py`) and the proxy (`proxy/app.py`), and `set_pdeathsig`.

Caveat (Linux semantics): the parent-death signal fires when the *thread* that spawned the
server exits, so enter `serving()` in the thread that will stay alive while it is used.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from tuneloop.errors import InputError, PhaseFailed

PR_SET_PDEATHSIG = 1
EXIT_BIND = 3
"""A server's exit status when it cannot bind its port (the embedded server's and the proxy's);
defined here, on the parent's side, so that the parent needs no FastAPI to recognise it."""
GRACE_S = 10.0
PROBE_MESSAGES = [{"role": "user", "content": "Hello"}]


def _prctl() -> Callable[..., int] | None:
    if os.uname().sysname != "Linux":
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return libc.prctl  # type: ignore[no-any-return]


# Resolved once in the parent: after fork, only async-signal-safe work should happen, and
# dlopen is not.
_PRCTL = _prctl()


def set_pdeathsig(sig: int = signal.SIGKILL) -> None:
    """Ask the kernel to send `sig` to this process when its parent thread dies (Linux)."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)


def log_tail(path: Path, lines: int = 25, width: int = 300) -> str:
    """The log's last `lines`, each cut at `width` characters (vLLM prints its list of
    supported architectures, some 30,000 characters, on one line)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no server log)"
    tail = [
        line if len(line) <= width else f"{line[:width]} … ({len(line) - width:,} more characters)"
        for line in text.splitlines()[-lines:]
    ]
    return "\n".join(f"  | {line}" for line in tail) or "  | (server log is empty)"


def port_in_use(host: str, port: int) -> bool:
    """True when something already listens on host:port (a connect succeeds or bind fails)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        # as the server binds: a port in TIME_WAIT is free, a listening one is not
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def bind(host: str, port: int) -> socket.socket:
    """The listening socket a server binds before anything slow (its model, its upstream), so
    that a busy port fails in milliseconds with `EXIT_BIND`; inheritable, for uvicorn."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and
    # without it each response (headers, then body) waits ~40 ms for a delayed ACK
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


def free_port(host: str) -> int:
    """A port that was free a moment ago (for servers that cannot bind port 0 themselves)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def client_host(host: str) -> str:
    """Where to connect for a server bound to `host` (wildcards mean loopback)."""
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


@dataclass
class Launch:
    """How to start one server process and how to know it is ready."""

    argv: list[str]
    served_model: str
    host: str
    port: int | None
    """The port, or None when the server writes it to `port_file` (it bound port 0)."""
    startup_timeout_s: float
    log_path: Path
    port_file: Path | None = None
    env: dict[str, str] | None = None
    api_key: str | None = None
    pdeathsig: int = signal.SIGKILL
    """SIGKILL for a single-process server; SIGTERM lets vLLM stop its own workers."""
    startup_hint: str | None = None
    """What to do, said after the log's last lines when the server exits during startup."""


def spawn(launch: Launch) -> subprocess.Popen[bytes]:
    launch.log_path.parent.mkdir(parents=True, exist_ok=True)
    sig = launch.pdeathsig
    with open(launch.log_path, "ab") as log:
        return subprocess.Popen(
            launch.argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=launch.env,
            start_new_session=True,
            preexec_fn=lambda: set_pdeathsig(sig),  # prctl only: no locks after fork
        )


def group_alive(pgid: int) -> bool:
    """Whether any process of group `pgid` still exists."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def terminate_group(proc: subprocess.Popen[bytes], grace_s: float = GRACE_S) -> None:
    """SIGTERM the process group, SIGKILL it after `grace_s`, wait until every member is gone."""
    pgid = proc.pid  # start_new_session made the server its group's leader
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        proc.wait()
    # Children the leader left behind (vLLM workers) are in the same group.
    if not _wait_group(pgid, grace_s):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        _wait_group(pgid, grace_s)


def _wait_group(pgid: int, timeout_s: float) -> bool:
    """True once no process of the group is left (an unreaped zombie still counts)."""
    deadline = time.monotonic() + timeout_s
    while group_alive(pgid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _died(proc: subprocess.Popen[bytes], launch: Launch) -> Exception:
    tail = log_tail(launch.log_path)
    if proc.returncode == EXIT_BIND:
        return InputError(
            f"serve.port: cannot bind {launch.host}:{launch.port or 0} (is the port in use?); "
            f"server log {launch.log_path}:\n{tail}"
        )
    hint = f"\n{launch.startup_hint}" if launch.startup_hint else ""
    return PhaseFailed(
        f"server exited with status {proc.returncode} during startup "
        f"({' '.join(launch.argv[:3])} …); last lines of {launch.log_path}:\n{tail}{hint}"
    )


def _read_port(launch: Launch) -> int | None:
    if launch.port is not None:
        return launch.port
    assert launch.port_file is not None
    try:
        return int(launch.port_file.read_text().strip())
    except (OSError, ValueError):
        return None


def probe(base_url: str, model: str, api_key: str | None, timeout_s: float) -> str | None:
    """One real chat completion; None when it succeeded, else what went wrong."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    body = {"model": model, "messages": PROBE_MESSAGES, "max_tokens": 1, "temperature": 0}
    try:
        r = httpx.post(
            f"{base_url}/chat/completions", json=body, headers=headers, timeout=timeout_s
        )
    except httpx.HTTPError as err:
        return f"{type(err).__name__}: {err}"
    if r.status_code != 200:
        return f"HTTP {r.status_code}: {r.text[:500]}"
    return None


def wait_ready(proc: subprocess.Popen[bytes], launch: Launch) -> str:
    """Poll until health and a real completion succeed; returns the base URL (…/v1)."""
    deadline = time.monotonic() + launch.startup_timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise _died(proc, launch)
        port = _read_port(launch)
        if port is not None:
            root = f"http://{client_host(launch.host)}:{port}"
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{root}/health", timeout=2.0).status_code == 200:
                    left = max(1.0, deadline - time.monotonic())
                    problem = probe(f"{root}/v1", launch.served_model, launch.api_key, left)
                    if problem is None:
                        return f"{root}/v1"
                    raise PhaseFailed(
                        f"server is up but its first completion failed ({problem}); "
                        f"last lines of {launch.log_path}:\n{log_tail(launch.log_path)}"
                    )
        time.sleep(0.2)
    raise PhaseFailed(
        f"server not ready within {launch.startup_timeout_s:g} s (serve.startup_timeout_s); "
        f"last lines of {launch.log_path}:\n{log_tail(launch.log_path)}"
    )


@contextlib.contextmanager
def launched(launch: Launch) -> Iterator[tuple[str, int]]:
    """Spawn, wait until ready, yield (base_url, pid); always tear the group down."""
    if launch.port and port_in_use(launch.host, launch.port):
        raise InputError(f"serve.port: {launch.host}:{launch.port} is already in use")
    proc = spawn(launch)
    try:
        base_url = wait_ready(proc, launch)
        yield base_url, proc.pid
        if proc.poll() is not None:  # died under its user (killed, OOM): what it served is torn
            raise PhaseFailed(
                f"the server exited with status {proc.returncode} while it was in use "
                f"({' '.join(launch.argv[:3])} …); last lines of {launch.log_path}:\n"
                f"{log_tail(launch.log_path)}"
            )
    finally:
        terminate_group(proc)


@contextlib.contextmanager
def log_file(log_path: Path | None) -> Iterator[Path]:
    """`log_path`, or a temporary log that is removed afterwards."""
    if log_path is not None:
        yield Path(log_path)
        return
    with tempfile.TemporaryDirectory(prefix="tuneloop-serve-") as tmp:
        yield Path(tmp) / "server.log"
