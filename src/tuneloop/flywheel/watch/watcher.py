"""The watcher: look at the traffic, decide, run one round at a time, remember everything.

    tuneloop watch loop.yaml [--once] [--max-rounds N]     # watch/command.py builds and runs:
    watcher = Watcher(state, cfg.flywheel, site)
    watcher.run()                                  # until SIGTERM/SIGINT (or once=True)

Tests: `pytest tests/flywheel/watch/` (a fake round command; `test_signals.py`: kill -9,
SIGTERM and a second watcher on the installed script).

Each step first finishes what is open: a round awaiting approval waits; a round `ready`,
`running` or `interrupted` (left by a killed or stopped watcher) is run again with the same id
and trigger file — the round command resumes it. Only with nothing open does the watcher look
(`gather_status`, the same record `tuneloop status` prints), and when a trigger fires and
pacing allows, it allocates the next id, writes the trigger file, records the round, then
spawns the round command:

    <round_command>   default: python -m tuneloop run CONFIG --round ROUND --trigger-file FILE
    exit 0 promoted · 1 rejected or awaiting promotion approval · 2 refused (input error, e.g.
    no fresh gate slice) · 3 a phase failed · 130/143 interrupted (state saved; resumable)

The round runs in its own session with its output appended to `<workdir>/flywheel/<id>.log`,
so the terminal's Ctrl-C reaches only the watcher, which forwards SIGINT/SIGTERM to the round,
records it `interrupted` when it exits 130/143, and returns. On Linux the round also gets
SIGTERM if the watcher dies without a word (kill -9; `PR_SET_PDEATHSIG`), so a training job
is never left running unwatched; a round process that still runs when a watcher restarts
(another OS, or a round that ignores SIGTERM) is waited for before it is resumed, so one
round never has two processes.

Deliberately different from a retrying job runner: a failed (3) or refused (2) round is not
retried; it counts as a rejection for the backoff, and the next round needs a new trigger
(labels are counted from the start of the last round that took them, hand-run or not, in the
ledger: a round refused before training took none, so its labels stay new — `last_round_of`).
Exit 1 is told apart by the round's own outcome row in the ledger: awaiting promotion approval
is no rejection. A refused round's training seconds count as 0; any other round's whole wall
time counts as training seconds (an upper bound: the round's phase timings are its own
business). A round that ignores SIGTERM is waited for: the watcher never kills a round that may
be writing its state.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tuneloop.config.flywheel import FlywheelConfig
from tuneloop.errors import InputError, PhaseFailed
from tuneloop.flywheel.paths import FlywheelPaths
from tuneloop.flywheel.status import FlywheelStatus, iso
from tuneloop.flywheel.triggers import after_poll, after_round
from tuneloop.flywheel.watch.look import (
    Looker,
    describe_poll,
    last_round_of,
    ledger_rounds,
    observations_of,
    round_dir,
)
from tuneloop.flywheel.watch.process import (
    ATTEMPT_HEADER,
    Stopper,
    live_process,
    log_tail,
    process_created,
    tie_to_watcher,
)
from tuneloop.flywheel.watch.round import (
    Site,
    Step,
    classify_exit,
    estimate_cost,
    new_row,
)
from tuneloop.flywheel.watch.state import (
    AttemptEnd,
    RoundRow,
    RoundTrigger,
    WatchState,
)
from tuneloop.gate.ledger import last_outcome
from tuneloop.records import write_record

APPROVAL_CHECK_S = 2.0
"""How often a watcher with a round awaiting approval looks for the approval."""


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Watcher:
    """Runs rounds when the triggers say so; see the module docstring."""

    def __init__(
        self,
        state: WatchState,
        flywheel: FlywheelConfig,
        site: Site,
        *,
        clock: Callable[[], float] = time.time,
        echo: Callable[[str], None] = _stderr,
        on_promoted: Callable[[], str] | None = None,
    ) -> None:
        self.on_promoted = on_promoted
        """Called after a round promoted (re-serving the new champion); returns a line."""
        self.state = state
        self.flywheel = flywheel
        self.site = site
        self.clock = clock
        self.echo = echo
        self.stopper = Stopper()
        self.looker = Looker(
            flywheel, site.ledger, site.suite, site.audit_ids, site.prospect, site.watched
        )

    # ---- the loop ------------------------------------------------------------------------

    def run(self, *, once: bool = False, max_rounds: int | None = None) -> int:
        """Step until stopped (SIGTERM/SIGINT), after one step (`once`) or after `max_rounds`
        rounds settled. A bad traffic line stops `once`; the daemon logs it and looks again."""
        settled = 0
        with self.stopper.installed():
            while self.stopper.signal is None:
                try:
                    step = self.step()
                except InputError as err:
                    if once:
                        raise
                    self.note("error", f"look failed, retrying: {err}")
                    step = Step("idle", self.flywheel.poll_s)
                settled += step.settled
                if once or (max_rounds is not None and settled >= max_rounds):
                    break
                self.stopper.sleep(step.wait_s)
            if self.stopper.signal is not None:
                name = signal.Signals(self.stopper.signal).name
                self.note("stop", f"{name} received: the watcher stops")
        return 0

    def step(self) -> Step:
        """Finish what is open, else look once; at most one round runs."""
        row = self.state.open_round()
        if row is None:
            return self._look()
        if row.status == "awaiting_approval":
            return Step("awaiting_approval", APPROVAL_CHECK_S, row.round_id)
        return self._execute(row)

    # ---- looking ---------------------------------------------------------------------------

    def status(self, now: float) -> FlywheelStatus:
        """One look (see `look.Looker`: unchanged inputs are not read again)."""
        site = self.site
        last = last_round_of(self.state, site.workdir, site.train_data, site.before, site.ledger)
        return self.looker.look(last, self.state.pacing(), now)

    def _look(self) -> Step:
        now = self.clock()
        pacing = self.state.pacing()
        status = self.status(now)
        decision = status.triggers
        text = describe_poll(decision)
        if self.looker.reused:
            text += " [inputs unchanged since the last look]"
        self.state.after_poll(after_poll(pacing, fired=bool(decision.fired)), text, now)
        self._echo("poll", text, now)
        if decision.run:
            return self._new_round(status, now)
        if decision.fired and decision.blocked_by:
            wait = max(decision.allowed_at - now, min(self.flywheel.poll_s, 1.0))
            return Step("held", wait)
        if decision.fired:  # held for power: only new gate items release it
            return Step("held", decision.next_poll_s)
        return Step("idle", decision.next_poll_s)

    def _new_round(self, status: FlywheelStatus, now: float) -> Step:
        workdir = self.site.workdir
        # ids a round run by hand took (its folder, or only a ledger row) are not reused
        in_ledger = {r.round_id for r in ledger_rounds(self.site.ledger)}
        round_id = self.state.next_round_id(
            lambda rid: rid in in_ledger or round_dir(workdir, rid).exists()
        )
        estimate = estimate_cost(self.site.work, self.state.last_finished())
        spend = self.flywheel.approval.spend
        decision = status.triggers
        trigger = RoundTrigger(
            round_id=round_id,
            decided_at=iso(now),
            fired=decision.fired,
            firings=decision.firings,
            observations=observations_of(status),
            since=status.since,
            champion_version=status.champion.version if status.champion else None,
            estimate=estimate,
            spend_approval=spend,
        )
        trigger_file = FlywheelPaths(workdir).trigger_file(round_id)
        write_record(trigger_file, trigger)
        row = new_row(trigger, trigger_file, "awaiting_approval" if spend else "ready", now)
        fired = ", ".join(decision.fired)
        if spend:
            message = (
                f"round {round_id} ({fired}) awaits approval of its spend: {estimate.text()}; "
                f"approve with: tuneloop approve {round_id} --config {self.site.config or 'CONFIG'}"
            )
            self._record(
                lambda: self.state.create_round(row, "approval", message), "approval", message, now
            )
            return Step("awaiting_approval", APPROVAL_CHECK_S, round_id)
        message = f"round {round_id} for {fired}; estimated {estimate.text()}"
        self._record(lambda: self.state.create_round(row, "round", message), "round", message, now)
        return self._execute(row)

    # ---- running a round -------------------------------------------------------------------

    def _execute(self, row: RoundRow) -> Step:
        rid = row.round_id
        if self.stopper.signal is not None:
            return Step("round", 0.0, rid)  # asked to stop: the round stays open, resumable
        if row.status == "running" and row.pid is not None:
            self._wait_for_orphan(row)
            if self.stopper.signal is not None:
                return self._settle(row, None, 0.0, row.started_at or self.clock())
        now = self.clock()
        log = FlywheelPaths(self.site.workdir).round_log(rid)
        verb = f"resumed (attempt {row.attempts + 1})" if row.attempts else "started"
        message = f"round {rid} {verb}: {' '.join(self.command(row))}; output in {log}"
        self._record(lambda: self.state.start_attempt(rid, now, message), "start", message, now)
        began = time.monotonic()
        rc = self._spawn_and_wait(row, log)
        return self._settle(row, rc, time.monotonic() - began, row.started_at or now)

    def command(self, row: RoundRow) -> list[str]:
        """The round command's argv for `row`, its placeholders filled in."""
        values = {
            "{round}": row.round_id,
            "{trigger_file}": str(row.trigger_file),
            "{workdir}": str(self.site.workdir),
        }
        argv = []
        for arg in self.site.round_command:
            for key, value in values.items():
                arg = arg.replace(key, value)
            argv.append(arg)
        return argv

    def _spawn_and_wait(self, row: RoundRow, log: Path) -> int:
        argv = self.command(row)
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            header = f"{ATTEMPT_HEADER}{iso(self.clock())} watcher pid {os.getpid()}: {argv}\n"
            out.write(header.encode())
            out.flush()
            try:
                proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=tie_to_watcher(os.getpid()),
                )
            except OSError as err:
                end = AttemptEnd(
                    row.round_id, "interrupted", None, "not started", 0.0, self.clock()
                )
                self.state.end_attempt(end, None, f"round {row.round_id} not started: {err}")
                raise InputError(
                    f"cannot start the round command {argv[0]!r} ({err.strerror or err}); "
                    "fix --round-command and restart the watcher: the round resumes"
                ) from None
            self.state.set_process(row.round_id, proc.pid, process_created(proc.pid))
            with self.stopper.forwarding(proc.pid):
                return proc.wait()

    def _wait_for_orphan(self, row: RoundRow) -> None:
        assert row.pid is not None
        if live_process(row.pid, row.pid_started) is None:
            return
        self.note(
            "wait",
            f"round {row.round_id}: its process {row.pid} from an earlier watcher still runs; "
            "waiting for it to end before resuming",
            row.round_id,
        )
        with self.stopper.forwarding(row.pid):
            while live_process(row.pid, row.pid_started) is not None:
                self.stopper.sleep(0.5, wake_on_signal=False)

    def _settle(self, row: RoundRow, rc: int | None, wall: float, started_at: float) -> Step:
        rid, now = row.round_id, self.clock()
        status, outcome = classify_exit(rc) if rc is not None else ("interrupted", "interrupted")
        pacing = None
        if status == "interrupted":
            message = f"round {rid} {outcome}: restarting the watcher resumes it"
        else:
            awaiting = None
            if rc == 1:
                outcome, awaiting = self._not_promoted(rid, outcome)
            train_s = 0.0 if status == "refused" else row.wall_s + wall
            pacing = after_round(
                self.state.pacing(),
                started_at=started_at,
                train_seconds=train_s,
                promoted=rc == 0 or awaiting is not None,  # awaiting: no rejection
            )
            why = log_tail(FlywheelPaths(self.site.workdir).round_log(rid)) if rc else ""
            message = f"round {rid} {outcome} (exit {rc}, {row.wall_s + wall:.1f} s)"
            message += f": {why}" if why else ""
            if why and rc != 1:  # why it refused or failed, for the table of rounds
                outcome = f"{outcome}: {why[:200]}"
        end = AttemptEnd(rid, status, rc, outcome, wall, now)
        self._record(lambda: self.state.end_attempt(end, pacing, message), status, message, now)
        if rc == 0 and self.on_promoted is not None:
            self._reserve(rid)
        return Step("round", self.flywheel.poll_s, rid, settled=status != "interrupted")

    def _reserve(self, round_id: str) -> None:
        """Serve the new champion; a refused switch keeps the old one and is said, not fatal."""
        assert self.on_promoted is not None
        try:
            self.note("reserve", self.on_promoted(), round_id)
        except (InputError, PhaseFailed) as err:
            self.note("reserve", f"the new champion was not served (still the old): {err}")

    def _not_promoted(self, round_id: str, default: str) -> tuple[str, str | None]:
        """Exit 1 told apart by the round's own ledger record: (outcome, the gate run id
        awaiting promotion approval or None)."""
        last = last_outcome(self.site.ledger, round_id)
        outcome = last.outcome if last else None
        if last is not None and outcome == "awaiting_approval":
            run = str(last.run_id or "RUN")
            config = self.site.config or "CONFIG"
            return f"awaiting promotion approval: tuneloop approve {run} --config {config}", run
        return ("rejected" if outcome == "rejected" else default), None

    # ---- saying what happened --------------------------------------------------------------

    def _record(self, write: Callable[[], None], kind: str, message: str, at: float) -> None:
        write()
        self._echo(kind, message, at)

    def note(self, kind: str, message: str, round_id: str | None = None) -> None:
        now = self.clock()
        self.state.log(kind, message, now, round_id)
        self._echo(kind, message, now)

    def _echo(self, kind: str, message: str, at: float) -> None:
        self.echo(f"{iso(at)} {kind}: {message}")
