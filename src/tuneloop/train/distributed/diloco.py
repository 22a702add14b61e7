"""DiLoCo training across replica processes, with torchft's lighthouse, manager and recovery.

Run: `tuneloop train --method sft --diloco-replicas 2 --diloco-inner-steps 10 …`, or
`train.diloco` in loop.yaml. `run_diloco` starts the wheel's `torchft_lighthouse` as a process
of its own (log: `lighthouse.log`; or uses `train.diloco.lighthouse`), then one process per
replica group (`python -m tuneloop.train.distributed.diloco_replica`, each in its own
session), and watches them: a replica that dies (a crash, `kill -9`) is started again, up to
`train.diloco.max_restarts` times, and recovers its state from a live peer (see
`diloco_replica`). The others keep training meanwhile: the lighthouse drops the dead replica
from the next round once its heartbeats stop (`HEARTBEAT_TIMEOUT_MS`). The run is complete
when a replica has committed the last outer step; any replica still behind then is stopped. A
replica's tuneloop error (bad data, say) is raised here, not retried; a restarted replica that
finds no live peer to recover from (the run ended while it started) exits `EXIT_NO_PEER` and
is not restarted.

Deliberate choices. Each replica group is one process (rank 0 of 1); DiLoCo's point is few,
far-apart groups, and within a group `train.nproc` would be DDP, which this path does not
combine with it yet (refused). The loop is `plain_sft`'s, not TRL's (its docstring says why).
The lighthouse allows a round of one replica (`min_replicas: 1`) so that a survivor trains on
alone; with two live replicas torchft's split-brain rule still makes each round wait for both,
and the lighthouse waits up to `join_timeout_s` for a live replica that has not asked to join.
No checkpoints on disk: a replica recovers from a live peer only; replicas that all die at
once start over from the base. If the launcher itself is killed with -9, its replica and
lighthouse processes are left running (each has its own session, so that a kill -9 of one
replica takes its whole tree and nothing else).

Outputs in the work folder: the adapter (the global one, identical on every replica),
`metrics.jsonl` (one row per inner step of the replica that saved the adapter), the replicas'
logs `replica_<i>.jsonl`, `replica_<i>.log` and summaries `replica_<i>.json`
(`ReplicaSummary`), and `diloco.json` (`DilocoRunRecord`): bytes allreduced per replica,
restarts and recoveries with their times.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tuneloop.errors import InputError, PhaseFailed
from tuneloop.records import Record, read_jsonl, read_record_if_exists, write_record
from tuneloop.train.data import read_rows, sft_rows
from tuneloop.train.settings import TrainSettings


class DilocoRunRecord(Record):
    """`diloco.json`: what a DiLoCo run communicated, and its restarts and recoveries."""

    KIND = "diloco_run"
    VERSION = 1

    replicas: int
    """Replica groups (processes)."""
    inner_steps: int
    """H: inner steps between outer steps."""
    outer_steps: int
    """Outer steps committed."""
    bytes_allreduced: list[int]
    """Bytes handed to gloo's allreduce by each replica (the last process of each), counted."""
    trainable_bytes: int
    """Bytes of the trainable (LoRA) tensors: one allreduce per outer step sends this much."""
    final_loss: float
    """Loss of the final adapter on the first 512 training rows (token-weighted)."""
    restarts: list[dict[str, Any]] = []
    """Each restart: replica, exit status, seconds since start of the exit and of the restart."""
    recoveries: list[dict[str, Any]] = []
    """Each recovery from a peer: replica, seconds since start, outer step before and after."""
    seconds: float = 0.0
    """Wall-clock seconds from launch to the last outer step."""


class ReplicaSummary(Record):
    """`replica_<i>.json`: what one replica process did, written when it finishes."""

    KIND = "diloco_replica"
    VERSION = 1

    replica: int
    """Replica index."""
    outer_steps: int
    """Outer steps committed when it finished."""
    bytes_allreduced: int
    """Bytes this process handed to gloo's allreduce (counted by `CountingGloo`)."""
    allreduce_calls: int
    """Allreduce calls (one per trainable tensor per round)."""
    trainable_bytes: int
    """Bytes of the trainable (LoRA) tensors."""
    recovered_to_outer_step: int | None = None
    """The peer's outer step this process adopted when it recovered from it; None if never."""
    final_loss: float
    """Loss of its final adapter on the first 512 training rows (token-weighted)."""


def check_diloco(s: TrainSettings) -> None:
    """InputError naming the key when `train.diloco` cannot run with these settings."""
    problems = diloco_problems(s)
    if problems:
        raise InputError("\n".join(f"{key}: {message}" for key, message in problems))


def diloco_problems(s: TrainSettings) -> list[tuple[str, str]]:
    """(config key, message) for each setting `train.diloco` cannot run with; empty when
    DiLoCo is off. `tuneloop check` reports these before any compute, the run refuses them."""
    d = s.diloco
    if d.replicas == 0:
        return []
    out = []
    if s.method != "sft":
        out.append(("train.method", f"train.diloco trains `method: sft` only (got {s.method!r})"))
    if s.nproc != 1:
        out.append(("train.nproc", "train.diloco runs each replica as one process; set 1"))
    if s.adapter != "lora":
        out.append(("train.adapter", "train.diloco syncs LoRA adapters only; set lora"))
    if s.distributed.load_in_4bit:
        out.append(
            ("train.distributed.load_in_4bit", "train.diloco trains float32 on CPU; set false")
        )
    if s.steps % d.inner_steps:
        out.append(
            (
                "train.steps",
                f"{s.steps} is not a multiple of train.diloco.inner_steps ({d.inner_steps}): "
                "DiLoCo syncs every inner_steps steps",
            )
        )
    if s.batch_size % d.replicas:
        out.append(
            (
                "train.batch_size",
                f"{s.batch_size} is not divisible by train.diloco.replicas ({d.replicas}): it "
                "is the batch over all replicas",
            )
        )
    if d.lighthouse is not None and not _lighthouse_url(d.lighthouse):
        out.append(
            (
                "train.diloco.lighthouse",
                f"expected the URL of a running torchft lighthouse, http://HOST:PORT "
                f"(got {d.lighthouse!r})",
            )
        )
    return out


def _lighthouse_url(address: str) -> bool:
    """Whether `address` is an http(s) URL with a host and a port, as torchft dials it."""
    try:
        url = urlsplit(address)
        return url.scheme in ("http", "https") and bool(url.hostname) and url.port is not None
    except ValueError:  # a port out of range or not a number
        return False


def start_lighthouse(s: TrainSettings, work: Path) -> tuple[subprocess.Popen | None, str]:
    """(process or None, address): torchft's `torchft_lighthouse` for this run, logging to
    `lighthouse.log`, unless `train.diloco.lighthouse` names a running one."""
    try:
        import torchft  # noqa: F401  (the replicas import it; say so here, before any start)
    except ImportError as err:
        raise InputError(
            f"train.diloco needs torchft ({err}); pip install 'tuneloop[diloco]'"
        ) from None
    if s.diloco.lighthouse:
        return None, s.diloco.lighthouse
    binary = shutil.which("torchft_lighthouse", path=str(Path(sys.executable).parent))
    binary = binary or shutil.which("torchft_lighthouse")
    if binary is None:
        raise InputError(
            "train.diloco: torchft_lighthouse not found; pip install 'tuneloop[diloco]'"
        )
    port = _free_port()
    cmd = [binary, "--bind", f"[::]:{port}", "--min_replicas", "1", "--quorum_tick_ms", "100"]
    cmd += ["--join_timeout_ms", str(int(s.diloco.join_timeout_s * 1000))]
    cmd += ["--heartbeat_timeout_ms", str(HEARTBEAT_TIMEOUT_MS)]
    with open(work / "lighthouse.log", "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + 30
    while time.time() < deadline and proc.poll() is None:
        with socket.socket() as sock:
            if sock.connect_ex(("localhost", port)) == 0:
                return proc, f"http://localhost:{port}"
        time.sleep(0.1)
    proc.kill()
    raise PhaseFailed(f"torchft_lighthouse did not start:\n{_tail(work / 'lighthouse.log')}")


EXIT_NO_PEER = 75
"""A restarted replica's exit status when no live peer was there to recover from."""

HEARTBEAT_TIMEOUT_MS = 3000
"""A replica silent this long is dead to the lighthouse (torchft's default is 5000)."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("localhost", 0))
        return int(sock.getsockname()[1])


class Replicas:
    """The replica processes of one run: start, restart, stop."""

    def __init__(self, spec_path: Path, work: Path, n: int) -> None:
        self.spec_path, self.work, self.t0 = spec_path, work, time.time()
        self.procs: dict[int, subprocess.Popen] = {}
        self.restarts: list[dict[str, Any]] = []
        for i in range(n):
            self.start(i)

    def start(self, i: int, restart: bool = False) -> None:
        module = "tuneloop.train.distributed.diloco_replica"
        cmd = [sys.executable, "-m", module, str(self.spec_path), str(i)]
        cmd += ["--restart"] if restart else []
        env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
        with open(self.work / f"replica_{i}.log", "ab") as log:
            self.procs[i] = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        (self.work / f"replica_{i}.pid").write_text(str(self.procs[i].pid), encoding="utf-8")

    def stop_all(self) -> None:
        for p in self.procs.values():
            _signal_group(p, signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                _signal_group(p, signal.SIGKILL)
                p.wait()

    def watch(self, max_restarts: int, grace_s: float) -> int:
        """Restart dead replicas until one finishes; the index of the first to finish.

        A replica that exits with `EXIT_NO_PEER` (restarted, it found no live peer to recover
        from: the others have finished or are gone) is not restarted.
        """
        while True:
            time.sleep(0.2)
            codes = {i: p.poll() for i, p in self.procs.items()}
            done = [i for i, c in codes.items() if c == 0 and self.finished(i)]
            if done:
                break
            if all(c == EXIT_NO_PEER for c in codes.values()):
                raise PhaseFailed("DiLoCo: every replica lost its peers; no replica finished")
            for i, code in codes.items():
                if code is not None and code != EXIT_NO_PEER:
                    self._restart_or_fail(i, code, max_restarts)
        deadline = time.time() + grace_s
        while time.time() < deadline and any(p.poll() is None for p in self.procs.values()):
            time.sleep(0.2)
        self.stop_all()
        return done[0]

    def finished(self, i: int) -> bool:
        return (self.work / f"replica_{i}.json").is_file()

    def _restart_or_fail(self, i: int, code: int, max_restarts: int) -> None:
        error = self.work / f"replica_{i}.error"
        if error.is_file():  # a tuneloop error (bad data, a non-finite loss): not retried
            self.stop_all()
            raise PhaseFailed(f"DiLoCo replica {i}: {error.read_text(encoding='utf-8')}")
        if len(self.restarts) >= max_restarts:
            self.stop_all()
            tail = _tail(self.work / f"replica_{i}.log")
            raise PhaseFailed(
                f"DiLoCo replica {i} exited with status {code} after {len(self.restarts)} "
                f"restart(s) (train.diloco.max_restarts):\n{tail}"
            )
        died = round(time.time() - self.t0, 3)
        self.start(i, restart=True)
        self.restarts.append(
            {
                "replica": i,
                "status": code,
                "exited_s": died,
                "restarted_s": round(time.time() - self.t0, 3),
            }
        )
        print(f"train: DiLoCo replica {i} exited ({code}); restarted", file=sys.stderr, flush=True)


def _signal_group(p: subprocess.Popen, sig: int) -> None:
    """Signal a replica's process group (its own session) if it is still running."""
    if p.poll() is None:
        with contextlib.suppress(ProcessLookupError):  # it exited in between
            os.killpg(p.pid, sig)


def _tail(path: Path, lines: int = 20) -> str:
    text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
    return "\n".join(text.splitlines()[-lines:])


def run_diloco(base: Path, data: Path, work: Path, s: TrainSettings) -> DilocoRunRecord:
    """Train with DiLoCo in `work` (adapter, metrics.jsonl, diloco.json); the run's record."""
    check_diloco(s)
    sft_rows(read_rows(data))  # bad rows: one error here, not one per replica process
    lighthouse, address = start_lighthouse(s, work)
    spec = {
        "base": str(base),
        "data": str(data),
        "out_dir": str(work),
        "settings": s.model_dump(mode="json"),
        "lighthouse": address,
        "hostname": "localhost" if lighthouse is not None else socket.gethostname(),
    }
    spec_path = work / "diloco_spec.json"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    try:
        replicas = Replicas(spec_path, work, s.diloco.replicas)
        try:
            first = replicas.watch(s.diloco.max_restarts, grace_s=s.diloco.timeout_s)
        finally:
            replicas.stop_all()
    finally:
        if lighthouse is not None:
            lighthouse.terminate()
            lighthouse.wait()
        spec_path.unlink(missing_ok=True)
    record = collect(work, s, first, replicas)
    write_record(work / "diloco.json", record)
    return record


def collect(work: Path, s: TrainSettings, first: int, replicas: Replicas) -> DilocoRunRecord:
    """Move the first finisher's adapter into place; gather the replicas' logs."""
    for name in os.listdir(work / f"adapter_{first}"):
        shutil.move(str(work / f"adapter_{first}" / name), str(work / name))
    shutil.rmtree(work / "diloco_ready", ignore_errors=True)
    summaries: dict[int, ReplicaSummary | None] = {}
    for i in range(s.diloco.replicas):
        shutil.rmtree(work / f"adapter_{i}", ignore_errors=True)
        (work / f"replica_{i}.pid").unlink(missing_ok=True)
        summaries[i] = read_record_if_exists(work / f"replica_{i}.json", ReplicaSummary)
    done = summaries[first]
    assert done is not None  # `watch` returns a replica whose summary is written
    rows = {i: read_jsonl(work / f"replica_{i}.jsonl") for i in range(s.diloco.replicas)}
    write_metrics(work / "metrics.jsonl", rows[first], s.diloco.inner_steps)
    recoveries = [
        {
            "replica": i,
            "at_s": round(r["t"] - replicas.t0, 3),
            "outer_before": r["outer_before"],
            "outer_after": r["outer_after"],
        }
        for i in rows
        for r in rows[i]
        if r.get("event") == "round" and r.get("recovered")
    ]
    last = [r["t"] for r in rows[first] if r.get("event") == "round"]
    return DilocoRunRecord(
        replicas=s.diloco.replicas,
        inner_steps=s.diloco.inner_steps,
        outer_steps=done.outer_steps,
        bytes_allreduced=[x.bytes_allreduced if x else 0 for x in summaries.values()],
        trainable_bytes=done.trainable_bytes,
        final_loss=done.final_loss,
        restarts=replicas.restarts,
        recoveries=recoveries,
        seconds=round((max(last) if last else time.time()) - replicas.t0, 3),
    )


def write_metrics(path: Path, rows: list[dict[str, Any]], h: int) -> None:
    """metrics.jsonl in the trainers' names, one row per inner step (`step`, `loss`); a step
    trained again (a restarted replica's first round, a failed round) keeps its last loss."""
    steps = {r["outer"] * h + r["inner"] + 1: r["loss"] for r in rows if r.get("event") == "step"}
    text = "".join(
        json.dumps({"phase": "diloco", "step": step, "loss": loss}) + "\n"
        for step, loss in sorted(steps.items())
    )
    path.write_text(text, encoding="utf-8")
