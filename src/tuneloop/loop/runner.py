"""Run the phase table: fingerprints, resume, fail closed, one run per workdir.

A phase is skipped when its recorded fingerprint matches (same config subset, same input
hashes, same code version) and its recorded outputs still hash the same. Otherwise it runs in
its own folder; when it returns, every declared output must exist, or the loop stops there
(fail closed) with the phase, the missing artifact and the log to read. The runner computes no
statistic and defines no reward: it sequences phases and records provenance.

Nothing a user ran is deleted. A phase that runs again finds its old folder moved to
`<workdir>/quarantine/<time>-<phase>/` (with `why.json`), and starts from an empty folder —
except a crash resume of a resumable phase with the same fingerprint, which keeps its partial
rows (the evaluation fills only the missing keys). A re-run that redoes a phase that had
finished starts a new round: a new run id, the old one listed in `state.json`, so that its
verdict, archive and ledger rows are never reused for other evidence or overwritten.

A finished phase whose outputs verify may still run again, in place and in the same round,
when its `retry` hook says why (`track`: the last MLflow write failed, or the tracking
settings changed); nothing it depends on changed, so it is not a redo.

Before the first phase runs, each phase that will run gets its `preflight` (the gate refuses a
slice whose items a verdict already looked at), so a run that cannot end in an honest decision
is refused before any compute is spent.

Fault injection for tests: `TUNELOOP_KILL_AT=<phase>:start|end` makes the runner SIGKILL
itself at that boundary, so that resume can be tested without timing races.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from rich.console import Console

from tuneloop.config import LoopConfig
from tuneloop.errors import EXIT_TERMINATED, InputError, PhaseFailed, TuneloopError
from tuneloop.loop.context import PhaseContext
from tuneloop.loop.layout import PHASE_FILE, PHASE_LOG, RunLayout
from tuneloop.loop.phases import CHALLENGER_PHASES, PHASE_NAMES, PHASES, Phase
from tuneloop.loop.state import (
    Action,
    PhaseRecord,
    PlanLine,
    RunState,
    SupersededRun,
    WorkdirLock,
    load_state,
    now_iso,
    save_state,
)
from tuneloop.provenance import code_version
from tuneloop.records import canonical_json, sha256_bytes, sha256_path, write_json, write_record

console = Console(stderr=True)


class Interrupted(TuneloopError):
    """SIGTERM: unwind so that servers are torn down and state is saved. Exit status 143."""

    exit_code = EXIT_TERMINATED


@dataclass
class Selection:
    from_phase: str | None = None
    only: str | None = None
    names: tuple[str, ...] = PHASE_NAMES

    def validate(self) -> None:
        for name in (self.from_phase, self.only):
            if name is not None and name not in self.names:
                from tuneloop.errors import did_you_mean

                raise InputError(
                    f"unknown phase {name!r}{did_you_mean(name, self.names)}; "
                    f"phases: {', '.join(self.names)}"
                )

    def forced(self, name: str) -> bool:
        if self.only is not None:
            return name == self.only
        if self.from_phase is not None:
            return self.names.index(name) >= self.names.index(self.from_phase)
        return False

    def selected(self, name: str) -> bool:
        return self.only is None or name == self.only


class Decision(NamedTuple):
    action: Action
    reason: str
    fingerprint: str | None = None
    inputs: dict[str, str] = {}
    keep: bool = False
    """Keep the folder's partial contents (crash resume of a resumable phase, same inputs)."""


def fingerprint(phase: Phase, cfg: LoopConfig, inputs: dict[str, str], code: str) -> str:
    payload = {"phase": phase.name, "config": phase.config(cfg), "inputs": inputs, "code": code}
    return sha256_bytes(canonical_json(payload).encode())


def hash_outputs(folder: Path, phase: Phase, workdir: Path) -> dict[str, str]:
    out = {}
    for rel in phase.outputs:
        path = folder / rel
        if not path.exists():
            raise PhaseFailed(
                f"phase {phase.name!r} did not produce {path}; read {folder / PHASE_LOG}"
            )
        out[str(path.relative_to(workdir))] = sha256_path(path)
    return out


def outputs_verify(record: PhaseRecord, workdir: Path) -> bool:
    try:
        return all(sha256_path(workdir / rel) == h for rel, h in record.outputs.items())
    except OSError:
        return False


class Runner:
    def __init__(
        self,
        cfg: LoopConfig,
        config_path: Path,
        selection: Selection,
        phases: tuple[Phase, ...] = PHASES,
        challenger_phases: tuple[Phase, ...] = CHALLENGER_PHASES,
    ) -> None:
        self.cfg = cfg
        self.phases = phases
        self.challenger_phases = challenger_phases
        self.names = tuple(p.name for p in phases)
        self.phase_time = 0.0
        self.wall_s = 0.0
        self._hashes: dict[Path, str] = {}
        self.config_path = config_path
        self.sel = selection
        self.workdir = cfg.workdir
        self.layout = RunLayout(cfg.workdir)
        self.code = code_version()
        self.state: RunState | None = None

    # ---- decisions -------------------------------------------------------------------------

    def _hash(self, path: Path) -> str:
        """sha256 of an external input, once per invocation (several phases share the base)."""
        if path not in self._hashes:
            self._hashes[path] = sha256_path(path)
        return self._hashes[path]

    def _inputs(self, phase: Phase, records: dict[str, PhaseRecord]) -> dict[str, str] | None:
        """Input name → hash; None when an upstream phase has no verified outputs yet."""
        inputs = {name: self._hash(path) for name, path in phase.files(self.cfg).items()}
        for up in phase.after:
            rec = records.get(up)
            if rec is None or rec.status == "skipped":
                if self._phase(up).enabled(self.cfg):
                    return None
                continue
            if rec.status != "done":
                return None
            inputs.update({f"{up}:{k}": v for k, v in rec.outputs.items()})
        return inputs

    def decide(self, phase: Phase, records: dict[str, PhaseRecord]) -> Decision:
        """What to do with one phase given the records so far, and why."""
        if not phase.enabled(self.cfg):
            return Decision("off", "disabled by config")
        if not self.sel.selected(phase.name):
            return Decision("skip", "not selected (--only)")
        inputs = self._inputs(phase, records)
        if inputs is None:
            return Decision("run", "an upstream phase runs first")
        fp = fingerprint(phase, self.cfg, inputs, self.code)
        prev = records.get(phase.name)
        if self.sel.forced(phase.name):
            return Decision("redo", "forced by --from/--only", fp, inputs)
        resume = phase.resumable and prev is not None and prev.fingerprint == fp
        if prev is None or prev.status == "running":
            why = "never finished" if prev else "not run yet"
            return Decision("run", why, fp, inputs, keep=resume)
        if prev.status != "done":
            return Decision("redo", f"last attempt {prev.status}", fp, inputs, keep=resume)
        if prev.fingerprint != fp:
            return Decision("redo", "fingerprint changed (config, inputs or code)", fp, inputs)
        if not outputs_verify(prev, self.workdir):
            return Decision("redo", "recorded outputs no longer verify", fp, inputs)
        again = phase.retry(self.cfg, self.layout.phase(phase.name)) if phase.retry else None
        if again:  # in place and in this round: nothing it depends on changed
            return Decision("run", again, fp, inputs, keep=True)
        return Decision("skip", "fingerprint matches and outputs verify", fp, inputs)

    def plan(self) -> list[PlanLine]:
        """What would run and why; raises the preflight refusal a run would meet."""
        decisions = self._decisions(load_state(self.workdir))
        self._preflight(decisions)
        return [
            PlanLine(phase=name, action=d.action, reason=d.reason) for name, d in decisions.items()
        ]

    def _decisions(self, state: RunState | None) -> dict[str, Decision]:
        """Every phase's decision as the plan sees it (downstream of a run sees it run)."""
        records = dict(state.phases) if state else {}
        out = {}
        for phase in self.phases:
            d = self.decide(phase, records)
            out[phase.name] = d
            if d.action in ("run", "redo"):
                records.pop(phase.name, None)
        return out

    def _preflight(self, decisions: dict[str, Decision]) -> None:
        """Refuse, before any compute, a run whose phases cannot honestly finish."""
        for phase in self.phases:
            if phase.preflight is None or decisions[phase.name].action not in ("run", "redo"):
                continue
            unchanged = all(
                decisions[up].action in ("skip", "off") for up in phase.after if up in decisions
            )
            phase.preflight(self.cfg, self.workdir, unchanged)

    def _new_run_id(self) -> str:
        return f"{self.cfg.name}-{time.strftime('%Y%m%d-%H%M%S')}"

    def _maybe_new_round(self, decisions: dict[str, Decision]) -> None:
        """A re-run that redoes a finished phase is a new round with its own run id."""
        assert self.state is not None
        finished = {n for n, rec in self.state.phases.items() if rec.status == "done"}
        redone = [
            f"{name} ({d.reason})"
            for name, d in decisions.items()
            if d.action == "redo" and name in finished
        ]
        if not redone:
            return
        new_id = self._new_run_id()
        if new_id == self.state.run_id or any(r.run_id == new_id for r in self.state.previous_runs):
            new_id = f"{new_id}-{len(self.state.previous_runs) + 1}"
        old = SupersededRun(
            run_id=self.state.run_id, superseded_at=now_iso(), reason="redo: " + ", ".join(redone)
        )
        self.state.previous_runs = [*self.state.previous_runs, old]
        self.state.run_id = new_id
        console.print(
            f"[yellow]new round {new_id}[/yellow] (replaces {old.run_id}: {old.reason}); "
            "replaced outputs go to quarantine/"
        )

    # ---- running ---------------------------------------------------------------------------

    def run(self) -> RunState:
        self.sel.validate()
        with WorkdirLock(self.workdir), _signals_raise():
            state = load_state(self.workdir)
            decisions = self._decisions(state)
            self._preflight(decisions)
            self.state = state or RunState(
                run_id=self._new_run_id(), config_path=str(self.config_path), created_at=now_iso()
            )
            self._maybe_new_round(decisions)
            save_state(self.workdir, self.state)
            total_start = time.perf_counter()
            for phase in self.phases:
                self._step(phase)
            self.wall_s = time.perf_counter() - total_start
            return self.state

    def _step(self, phase: Phase) -> None:
        assert self.state is not None
        d = self.decide(phase, self.state.phases)
        if d.action == "off":
            self._record(PhaseRecord(phase=phase.name, status="skipped", fingerprint=""))
            console.print(f"[dim]· {phase.name}: off ({d.reason})[/dim]")
            return
        if d.action == "skip":
            console.print(f"[green]✓[/green] {phase.name}: skip ({d.reason})")
            return
        if d.fingerprint is None:
            raise PhaseFailed(f"phase {phase.name!r} cannot run: its upstream phase did not finish")
        console.rule(f"[bold]{phase.name}[/bold] ({d.reason})")
        self._execute(phase, d)

    def _execute(self, phase: Phase, d: Decision) -> None:
        assert self.state is not None and d.fingerprint is not None
        fp, inputs = d.fingerprint, d.inputs
        folder = self.layout.phase(phase.name)
        if folder.exists() and not d.keep:
            quarantine(self.workdir, folder, d.reason, self.state.phases.get(phase.name))
        folder.mkdir(parents=True, exist_ok=True)
        rec = PhaseRecord(
            phase=phase.name, status="running", fingerprint=fp, inputs=inputs, started_at=now_iso()
        )
        self._record(rec)
        _maybe_kill(phase.name, "start")
        ctx = PhaseContext(
            cfg=self.cfg,
            workdir=self.workdir,
            folder=folder,
            run_id=self.state.run_id,
            upstream={p: self.layout.phase(p) for p in self.names},
            log_path=folder / PHASE_LOG,
            inputs=inputs,
            nested=self._nested,
        )
        t0 = time.perf_counter()
        try:
            phase.run(ctx)
            rec.outputs = hash_outputs(folder, phase, self.workdir)
        except BaseException as err:
            rec.status, rec.error = "failed", _describe(err, phase, folder)
            rec.duration_s, rec.ended_at = time.perf_counter() - t0, now_iso()
            rec.notes = _jsonable(ctx.notes)
            self._record(rec)
            if isinstance(err, InputError):
                raise InputError(f"phase {phase.name!r}: {err}") from None
            if isinstance(err, PhaseFailed | Interrupted | KeyboardInterrupt):
                raise
            raise PhaseFailed(rec.error) from err
        rec.status = "done"
        rec.duration_s, rec.ended_at = time.perf_counter() - t0, now_iso()
        self.phase_time += rec.duration_s
        rec.notes = _jsonable({**ctx.notes, "rss_mb": _rss_mb()})
        self._record(rec)
        console.print(f"[green]✓[/green] {phase.name}: done in {rec.duration_s:.1f}s")
        _maybe_kill(phase.name, "end")

    def _nested(self, cfg: LoopConfig) -> RunState:
        """A portfolio challenger's own round, in its own workdir (resumed like any run)."""
        table = self.challenger_phases
        names = tuple(p.name for p in table)
        return Runner(cfg, self.config_path, Selection(names=names), table, table).run()

    def _phase(self, name: str) -> Phase:
        return next(p for p in self.phases if p.name == name)

    def _record(self, rec: PhaseRecord) -> None:
        assert self.state is not None
        self.state.phases = {**self.state.phases, rec.phase: rec}
        if rec.status != "skipped":
            write_record(self.layout.phase(rec.phase) / PHASE_FILE, rec)
        save_state(self.workdir, self.state)


def quarantine(workdir: Path, folder: Path, reason: str, record: PhaseRecord | None) -> Path:
    """Move a phase folder aside (never delete what a user ran); returns where it went."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    kept = RunLayout(workdir).quarantine
    target = kept / f"{stamp}-{folder.name}"
    n = 1
    while target.exists():
        n += 1
        target = kept / f"{stamp}-{folder.name}-{n}"
    target.parent.mkdir(parents=True, exist_ok=True)
    folder.rename(target)
    why: dict[str, Any] = {"phase": folder.name, "reason": reason, "moved_at": now_iso()}
    if record is not None:
        why["record"] = record.model_dump(mode="json", by_alias=True)
    write_json(target / "why.json", why)
    console.print(f"[dim]  previous {folder.name}/ moved to {target.relative_to(workdir)}[/dim]")
    return target


def _describe(err: BaseException, phase: Phase, folder: Path) -> str:
    if isinstance(err, Interrupted | KeyboardInterrupt):
        return f"phase {phase.name!r} interrupted"
    logs = sorted(str(p) for p in folder.glob("*.log"))
    where = f"; read {', '.join(logs)}" if logs else ""
    return f"phase {phase.name!r} failed: {type(err).__name__}: {err}{where}"


def _rss_mb() -> float:
    import psutil

    return round(psutil.Process().memory_info().rss / 2**20, 1)


def _jsonable(notes: dict[str, Any]) -> dict[str, Any]:
    import json

    return json.loads(json.dumps(notes, default=str))


def _maybe_kill(phase: str, when: str) -> None:
    if os.environ.get("TUNELOOP_KILL_AT") == f"{phase}:{when}":
        os.kill(os.getpid(), signal.SIGKILL)


@contextmanager
def _signals_raise() -> Iterator[None]:
    """Turn SIGTERM into an exception so that `with serving(...)` blocks tear down."""

    def handler(signum: int, frame: Any) -> None:
        raise Interrupted(f"received signal {signum}")

    old: Callable[..., Any] | int | None = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
