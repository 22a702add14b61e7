"""PID 1 of a sandbox run: build the file-system jail, start the untrusted program, report.

Run by `execute.py` inside fresh namespaces, never imported:

    unshare --pid --fork --kill-child --mount --net --ipc --uts [--map-root-user] \\
        python -I -S pid1.py JAIL BOX WORK STATUS UID|- PYTHON MAIN [READ_ONLY_PATH...]

It is standard library only (it runs under `-I -S`), imports little (ctypes; its start-up is
per-run overhead) and is trusted: it is root (or root of a new user namespace) while it
mounts. The untrusted program gets this script's environment, which `execute.py` set. Steps:

1. A small tmpfs becomes the new root. Into it, read-only and at their own paths: `/usr`,
   the `/bin`, `/lib*`, `/sbin` links or folders, `/etc/ld.so.cache`, the Python installation;
   the run's folder (read-only) with its `work` folder (writable) inside; `/dev/{null,zero,
   full,random,urandom}`; a fresh `/proc` (this PID namespace only). Nothing else of the host
   is visible: no `/tmp`, `/home`, `/root`, `/etc`, `/sys`, `/dev/shm`.
2. `pivot_root` into it and detach the old root, so that no later `chroot` trick (e.g. from
   a user namespace the code makes for itself) can reach the host tree.
3. Fork the untrusted program: drop every capability from the bounding set, set
   no_new_privs, switch to the run's own uid when one is given, exec Python on `main.py`.
4. Wait for it, write its wait status to the status file and exit. As PID 1 exits, the
   kernel SIGKILLs everything left in the namespace (forks, `setsid()` daemons, double forks)
   and `unshare` returns only after that.

Deliberately PID 1 is this script and not the untrusted program: the kernel does not deliver
default-action signals such as SIGXCPU to a namespace's init, and a PID 1 that the code
controls could leave its orphans unreaped.
"""

from __future__ import annotations

import ctypes
import os
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND = 32, 4096
MNT_DETACH = 2
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 24, 38
# glibc has no pivot_root() wrapper; the syscall number is per architecture
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 217, "riscv64": 41, "ppc64le": 203, "s390x": 217}
DEVICES = ("null", "zero", "full", "random", "urandom")

_libc = ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


class Spec:
    """The command line: JAIL BOX WORK STATUS UID|- PYTHON MAIN (no typing import: start-up)."""

    def __init__(self, argv: list[str]) -> None:
        self.jail, self.box, self.work, self.status, self.uid, self.python, self.main = argv


def _mount(
    src: str | None, dst: str, fstype: str | None, flags: int, data: str | None = None
) -> None:
    enc = [None if s is None else s.encode() for s in (src, dst, fstype, data)]
    _check(_libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]), f"mount {dst}")


def _bind(src: str, dst: str, *, writable: bool = False) -> None:
    """Bind `src` at `dst`, then remount it read-only (unless writable), nosuid, nodev."""
    if os.path.isdir(src):
        os.makedirs(dst, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        open(dst, "a").close()
    _mount(src, dst, None, MS_BIND)
    # a remount must keep the flags the source mount is locked with (noexec, say)
    flags = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | (0 if writable else MS_RDONLY)
    if os.statvfs(src).f_flag & os.ST_NOEXEC:
        flags |= MS_NOEXEC
    _mount(None, dst, None, flags)


def build_jail(spec: Spec, binds: list[str]) -> None:
    jail = spec.jail
    _mount("tmpfs", jail, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    done: list[str] = []
    for path in binds:
        if not os.path.lexists(path) or any((path + "/").startswith(d + "/") for d in done):
            continue
        if os.path.islink(path) and os.path.dirname(path) == "/":
            os.symlink(os.readlink(path), jail + path)  # /bin -> usr/bin on merged-/usr
        else:
            _bind(path, jail + path)
        done.append(path)
    _bind(spec.box, jail + spec.box)
    _bind(spec.work, jail + spec.work, writable=True)
    for name in DEVICES:
        dst = f"{jail}/dev/{name}"
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        open(dst, "a").close()
        _mount(f"/dev/{name}", dst, None, MS_BIND)
    os.mkdir(jail + "/proc")
    # a container that masks parts of /proc refuses this; Python runs without it
    _libc.mount(b"proc", f"{jail}/proc".encode(), b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    os.chdir(jail)
    machine = os.uname().machine
    number = SYS_PIVOT_ROOT.get(machine)
    if number is None:
        raise OSError(f"pivot_root: unknown syscall number on {machine}")
    # pivot_root(".", ".") stacks the old root under the new one; detaching it leaves only
    # the jail in this mount namespace
    _check(_libc.syscall(number, b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "umount old root")
    os.chdir("/")
    _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def start(spec: Spec, status_fd: int) -> int:
    """Fork and exec the untrusted program; return its pid."""
    pid = os.fork()
    if pid:
        return pid
    try:
        for cap in range(64):
            if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
                break  # past the last capability this kernel knows
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        if spec.uid != "-":
            uid = int(spec.uid)
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        os.chdir(spec.work)
        os.execv(spec.python, [spec.python, "-I", "-S", spec.main])
    except BaseException as err:  # noqa: BLE001 - anything here is a sandbox failure
        os.write(status_fd, f"error {err}\n".encode())
    os._exit(127)


def main() -> int:
    spec = Spec(sys.argv[1:8])
    status_fd = os.open(spec.status, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
    try:
        build_jail(spec, sys.argv[8:])
    except OSError as err:
        os.write(status_fd, f"error jail: {err}\n".encode())
        return 125
    child = start(spec, status_fd)
    _, status = os.waitpid(child, 0)
    os.write(status_fd, f"{status}\n".encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
