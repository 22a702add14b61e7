"""`tuneloop status`: where the flywheel stands, read from the config's artifacts and state.

    tuneloop status loop.yaml [--audit-log runs/loop/eval_audit] [--json]

Reads loop.yaml, the gate ledger, the traffic logs of `flywheel.traffic`, and the watcher's
state (`<workdir>/flywheel.db`: pacing, rounds, decisions) — the record the watcher acts on.
The last round is the latest in the ledger that was not refused before training, whether the
watcher or a person (`tuneloop run CONFIG --round next`) ran it (`watch.last_round_of`); before
any round, the workdir's own (`state.json`: its run id and start; `data/sft.jsonl` or
`train.data`: the drift reference), and pacing is as of its start. The managed proxy's log
folder not there yet (a fresh flywheel: the watcher creates it) is shown as no traffic; any
other missing traffic path is refused (`loop.preflight.flywheel_problems`, as `watch` does).
Writes nothing, creates nothing. Prints the status, then the approvals, the rounds (the
watcher's and those run by hand) and decisions; `--json` prints the status record alone. Exit
status 0, or 2 for a bad config or input.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer

from tuneloop.config.flywheel import ApprovalConfig
from tuneloop.errors import InputError
from tuneloop.flywheel.render import render_status
from tuneloop.flywheel.status import gather_status, iso
from tuneloop.flywheel.watch import (
    Decision,
    RoundRow,
    audit_part,
    last_round,
    last_round_of,
    ledger_rounds,
    open_watch_state,
)
from tuneloop.gate.ledger import Round


def status(
    config: Annotated[Path, typer.Argument(help="The loop.yaml of the served champion's loop.")],
    audit_log: Annotated[
        Path | None,
        typer.Option(help="Sample-log folder of the champion on the audit part (accuracy)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the status record.")] = False,
) -> None:
    """Show the champion, new labels (before and after the corpus steps), drift, audit
    accuracy, the next round's gate power, the α spent, which triggers would fire, and the
    watcher's pacing, rounds and decisions."""
    from tuneloop.config import load_config
    from tuneloop.flywheel.prospect import next_round
    from tuneloop.loop.layout import ledger_path
    from tuneloop.loop.preflight import flywheel_problems
    from tuneloop.suite import load_suite

    if audit_log is not None and not audit_log.exists():
        raise InputError(f"--audit-log: {audit_log} does not exist (a sample-log folder)")
    cfg = load_config(config, semantic=flywheel_problems)  # a schema error hides none of these
    problems = flywheel_problems(cfg)  # run by load_config only when the schema failed
    if problems:
        raise InputError(f"{config}: " + "; ".join(f"{k}: {m}" for k, m in problems))
    flywheel = cfg.flywheel
    suite = load_suite(cfg.suite.path, cfg.suite.default_scorer)
    ledger = ledger_path(cfg)
    before = last_round(cfg.workdir, cfg.train.data, None)
    state = open_watch_state(cfg.workdir)
    try:
        last = last_round_of(state, cfg.workdir, cfg.train.data, before, ledger)
        result = gather_status(
            flywheel,
            ledger_path=ledger,
            last_round=last,
            suite=suite.items,
            audit_ids=audit_part(cfg, suite),
            audit_log=audit_log,
            pacing=state.pacing() if state else None,
            now=time.time(),
            next_round=next_round(cfg, config, audit_log or (last.audit_log if last else None)),
        )
        if as_json:
            typer.echo(json.dumps(result.to_json(), indent=2))
            return
        rounds, decisions = (state.rounds(10), state.decisions(20)) if state else ([], [])
    finally:
        if state is not None:
            state.close()
    typer.echo(render_status(result))
    typer.echo(render_watch(flywheel.approval, rounds, decisions, ledger_rounds(ledger)))


def render_watch(
    approval: ApprovalConfig,
    rounds: list[RoundRow],
    decisions: list[Decision],
    ledger: Sequence[Round] = (),
) -> str:
    """Approvals, recent rounds and decisions, in `render_status`'s layout. `ledger` rounds
    that the watcher did not start (`tuneloop run CONFIG --round …` by hand) are listed
    with the watcher's, marked `by hand`."""

    def line(label: str, text: str) -> str:
        return f"{label:<10} {text}"

    need = {True: "needs tuneloop approve", False: "automatic"}
    out = [line("approval", f"spend {need[approval.spend]}; promotion {need[approval.promote]}")]
    watched = {r.round_id for r in rounds}
    texts: list[tuple[str, str]] = [(r.round_id, _watched_text(r)) for r in rounds]
    texts += [(r.round_id, _hand_text(r)) for r in ledger if r.round_id not in watched]
    if not texts:
        out.append(
            line(
                "rounds",
                "no rounds yet (`tuneloop watch CONFIG` starts them when a trigger fires; "
                "`tuneloop run CONFIG --round next` runs one by hand)",
            )
        )
    for i, (_, text) in enumerate(sorted(texts)[-10:]):
        out.append(line("rounds" if i == 0 else "", text))
    for i, d in enumerate(decisions):
        out.append(line("decisions" if i == 0 else "", f"{iso(d.at)} {d.kind}: {d.message}"))
    return "\n".join(out)


def _watched_text(r: RoundRow) -> str:
    when = iso(r.started_at or r.created_at)
    text = f"{r.round_id}  {r.status:<17} {','.join(r.trigger.fired):<18} {when}"
    if r.status in ("finished", "refused"):
        text += f"  exit {r.exit_code}, {r.wall_s:.0f} s: {r.outcome}"
    elif r.status == "awaiting_approval":
        text += f"  estimated {r.trigger.estimate.text()}"
    return text


def _hand_text(r: Round) -> str:
    """A ledger round the watcher did not start: its latest outcome and why."""
    outcome = r.last.outcome if r.last else "running"
    why = f": {r.last.reason[:200]}" if r.last and r.last.reason else ""
    return f"{r.round_id}  {outcome:<17} {'by hand':<18} {r.start.started_at}{why}"
