"""Run untrusted Python (model-written code plus its tests) in a contained subprocess.

    from tuneloop.scorers.sandbox import Limits, run_python
    result = run_python("print(1 + 1)", Limits(wall_s=5))
    result.returncode, result.stdout, result.reason      # 0, "2\n", None

Layers, each of which works without the others:
- **Kernel isolation when running as root** (probed once, see `isolation()`): the child gets
  its own empty network namespace (`unshare -n`: no interfaces but a down loopback) and runs
  as `nobody` (`setpriv`), so it cannot write outside its own folder, read root's files, or
  fork past RLIMIT_NPROC (which root ignores). Unprivileged, `unshare -rn` (a user namespace)
  is tried for the network; when that is refused too only the next layer remains.
- **An audit hook** (PEP 578) installed before the code runs: creating sockets, spawning
  programs (`exec*`, `system`, `posix_spawn`, `subprocess`) and writing or deleting outside
  the working folder raise `PermissionError`; so does `fork` when the code runs as root
  (RLIMIT_NPROC would not bound a fork bomb). Deliberately we do not rely on it alone: code
  that loads `ctypes` can step around it, which is why the kernel layer comes first.
- **Resource limits**: RLIMIT_CPU, RLIMIT_AS (memory), RLIMIT_FSIZE (largest file, and so
  the captured stdout/stderr, which go to files), RLIMIT_NPROC, RLIMIT_NOFILE, no core dumps;
  a wall-clock limit after which the whole process group (its own session) is SIGKILLed; the
  group is killed after every run too, so forked leftovers do not outlive it.
- **A clean slate**: a fresh temporary folder as cwd, HOME and TMPDIR; an environment of only
  PATH, LANG and a few PYTHON* switches (no secrets); `python -I -S` (no user site, no
  site-packages: tests get the standard library only); at most `output_bytes` of stdout and
  stderr are read back.

Where this was built (root in a container), `unshare -n` and `setpriv` both work, so scored
code runs with layers netns + nobody + audit_hook + rlimits; `SandboxResult.isolation` and the
scorer's `detail["isolation"]` record which layers were in force for every run.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

NOBODY = 65534


@dataclass(frozen=True)
class Limits:
    wall_s: float = 10.0
    """Wall-clock seconds before the process group is killed."""
    cpu_s: int = 5
    """CPU seconds (RLIMIT_CPU)."""
    memory_mb: int = 512
    """Address-space limit (RLIMIT_AS)."""
    file_mb: int = 8
    """Largest file the code may write, stdout/stderr included (RLIMIT_FSIZE)."""
    output_bytes: int = 64_000
    """Bytes of stdout and of stderr read back."""
    nproc: int = 32
    """Processes of the sandbox user (RLIMIT_NPROC; ignored by the kernel for root)."""


@dataclass(frozen=True)
class SandboxResult:
    returncode: int | None
    """Exit status; negative is the killing signal; None when the wall limit struck."""
    stdout: str
    stderr: str
    reason: str | None
    """None on a clean exit 0, else timeout, cpu_limit, memory_limit, output_limit,
    exit_<n>, signal_<name> or sandbox_error."""
    isolation: tuple[str, ...]
    """Layers in force: netns, nobody, audit_hook, rlimits."""


# The guard runs inside the child before the untrusted code. It captures what it needs in
# default arguments so that deleting module globals does not disarm it.
_GUARD = r"""
import os as _os, sys as _sys
def _tuneloop_guard(event, args, _o=_os, _block_fork=_os.geteuid() == 0,
                    _root=_os.path.realpath(_os.getcwd()) + _os.sep,
                    _wr=_os.O_WRONLY | _os.O_RDWR | _os.O_CREAT | _os.O_APPEND | _os.O_TRUNC):
    if event.startswith("socket.") and event != "socket.gethostname":
        raise PermissionError("sandbox: network access is disabled")
    if event == "os.fork" and _block_fork:
        raise PermissionError("sandbox: fork is disabled (no process limit applies to root)")
    if event in ("os.exec", "os.system", "os.posix_spawn", "os.spawn", "subprocess.Popen",
                 "os.forkpty", "pty.spawn"):
        raise PermissionError("sandbox: starting programs is disabled")
    if event == "open":
        path, mode, flags = args
        writing = any(c in (mode or "") for c in "wax+") or bool((flags or 0) & _wr)
        paths = [path] if writing else []
    elif event in ("os.remove", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.truncate",
                   "os.utime", "shutil.rmtree", "os.symlink", "os.link", "os.rename"):
        paths = list(args[:2])
    else:
        return
    for p in paths:
        if not isinstance(p, (str, bytes, _o.PathLike)):
            continue
        p = _o.fsdecode(_o.fspath(p))
        if not (_o.path.realpath(p) + _o.sep).startswith(_root):
            raise PermissionError(f"sandbox: writing outside the working folder ({p})")
_sys.addaudithook(_tuneloop_guard)
del _tuneloop_guard, _os, _sys
"""


def _python() -> str:
    return os.path.realpath(sys.executable)


def _try(cmd: list[str]) -> bool:
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=20, env=_clean_env("/tmp"))
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


@functools.lru_cache(maxsize=1)
def isolation() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(command prefix, layer names) for kernel isolation, probed once per process."""
    probe = [_python(), "-I", "-S", "-c", "pass"]
    unshare, setpriv = shutil.which("unshare"), shutil.which("setpriv")
    drop = [setpriv or "", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    if os.geteuid() == 0 and unshare and setpriv and _try([unshare, "-n", *drop, *probe]):
        return (unshare, "-n", *drop), ("netns", "nobody")
    if os.geteuid() == 0 and setpriv and _try([*drop, *probe]):
        return tuple(drop), ("nobody",)
    if unshare and _try([unshare, "-rn", *probe]):
        return (unshare, "-rn"), ("netns",)
    return (), ()


def _clean_env(home: str) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": home,
        "TMPDIR": home,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONIOENCODING": "utf-8",
    }


def _set_limits(limits: Limits) -> None:
    import resource

    def cap(which: int, value: int, hard: int | None = None) -> None:
        # a limit the platform refuses is left as it was; the others still hold
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(which, (value, value if hard is None else hard))

    # soft < hard so the kernel sends SIGXCPU first, which names the cause
    cap(resource.RLIMIT_CPU, max(1, limits.cpu_s), max(1, limits.cpu_s) + 1)
    cap(resource.RLIMIT_AS, limits.memory_mb << 20)
    cap(resource.RLIMIT_FSIZE, limits.file_mb << 20)
    cap(resource.RLIMIT_NPROC, limits.nproc)
    cap(resource.RLIMIT_NOFILE, 64)
    cap(resource.RLIMIT_CORE, 0)


def _read_capped(path: Path, limit: int) -> str:
    with path.open("rb") as fh:
        return fh.read(limit).decode("utf-8", errors="replace")


def _kill_group(pgid: int) -> None:
    """SIGKILL the process group until it is empty: a child forked while the first signal
    was being delivered can miss it, so one killpg does not always end a fork bomb."""
    for _ in range(200):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        if not _group_alive(pgid):
            return
        time.sleep(0.005)


def _group_alive(pgid: int) -> bool:
    """Whether any non-zombie process is still in the group (Linux /proc; True elsewhere)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


def _reason(rc: int | None, stderr: str) -> str | None:
    if rc is None:
        return "timeout"
    if rc == 0:
        return None
    if rc in (-signal.SIGXCPU, -signal.SIGKILL) and "MemoryError" not in stderr:
        return "cpu_limit" if rc == -signal.SIGXCPU else "killed"
    if rc == -signal.SIGXFSZ or "File too large" in stderr:
        return "output_limit"
    if "MemoryError" in stderr:
        return "memory_limit"
    if rc < 0:
        return f"signal_{signal.Signals(-rc).name}" if -rc in signal.valid_signals() else "signal"
    return f"exit_{rc}"


def run_python(source: str, limits: Limits = Limits(), *, kernel: bool = True) -> SandboxResult:
    """Run `source` under the sandbox; never raises for anything the code does.

    `kernel=False` skips the namespace/`nobody` layer (tests use it to check the audit hook
    and resource limits on their own).
    """
    prefix, layers = isolation() if kernel else ((), ())
    root = Path(tempfile.mkdtemp(prefix="tuneloop-sandbox-"))
    work = root / "work"
    try:
        work.mkdir()
        if "nobody" in layers:
            os.chown(work, NOBODY, NOBODY)
        (root / "main.py").write_text(_GUARD + "\n" + source, encoding="utf-8")
        os.chmod(root, 0o755)
        return _run(
            root,
            work,
            [*prefix, _python(), "-I", "-S", str(root / "main.py")],
            limits,
            (*layers, "audit_hook", "rlimits"),
        )
    except OSError as err:
        return SandboxResult(None, "", str(err), "sandbox_error", layers)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _run(
    root: Path, work: Path, cmd: list[str], limits: Limits, layers: tuple[str, ...]
) -> SandboxResult:
    out, err = root / "stdout", root / "stderr"
    with out.open("wb") as fo, err.open("wb") as fe:
        proc = subprocess.Popen(
            cmd,
            cwd=work,
            env=_clean_env(str(work)),
            stdin=subprocess.DEVNULL,
            stdout=fo,
            stderr=fe,
            start_new_session=True,  # its own process group, so one killpg reaches forks
            preexec_fn=functools.partial(_set_limits, limits),
        )
        try:
            rc: int | None = proc.wait(timeout=limits.wall_s)
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            _kill_group(proc.pid)
            proc.wait()
    stdout = _read_capped(out, limits.output_bytes)
    stderr = _read_capped(err, limits.output_bytes)
    return SandboxResult(rc, stdout, stderr, _reason(rc, stderr), layers)
