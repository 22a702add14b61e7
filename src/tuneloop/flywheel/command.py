"""`tuneloop status`: where the flywheel stands, read from the config's artifacts and state.

    tuneloop status loop.yaml [--audit-log runs/loop/eval_audit] [--json]

Reads loop.yaml, the gate ledger, the traffic logs of `flywheel.traffic`, and the watcher's
state (`<workdir>/flywheel.db`: pacing, rounds, decisions) — the record the watcher acts on.
Before any watcher ran, the last round is the workdir's (`state.json`: its run id and start;
`data/sft.jsonl` or `train.data`: the drift reference) and pacing is as of its start. Writes
nothing, creates nothing. Prints the status, then the approvals, recent rounds and decisions;
`--json` prints the status record alone. Exit status 0, or 2 for a bad config or input.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Annotated

import typer

from tuneloop.config.flywheel import ApprovalConfig
from tuneloop.flywheel.render import render_status
from tuneloop.flywheel.status import gather_status, iso
from tuneloop.flywheel.watch import (
    Decision,
    RoundRow,
    last_round,
    last_round_of,
    open_watch_state,
)


def status(
    config: Annotated[Path, typer.Argument(help="The loop.yaml of the served champion's loop.")],
    audit_log: Annotated[
        Path | None,
        typer.Option(help="Sample-log folder of the champion on the audit part (accuracy)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the status record.")] = False,
) -> None:
    """Show the champion, new labels, drift, audit accuracy, which triggers would fire, and
    the watcher's pacing, rounds and decisions."""
    from tuneloop.config import load_config
    from tuneloop.loop.layout import ledger_path
    from tuneloop.suite import load_suite

    cfg = load_config(config)
    flywheel = cfg.flywheel
    suite = load_suite(cfg.suite.path, cfg.suite.default_scorer)
    before = last_round(cfg.workdir, cfg.train.data, None)
    state = open_watch_state(cfg.workdir)
    try:
        last = last_round_of(state, cfg.workdir, cfg.train.data, before) if state else before
        if last is not None and audit_log is not None:
            last = dataclasses.replace(last, audit_log=audit_log)
        result = gather_status(
            flywheel,
            ledger_path=ledger_path(cfg),
            last_round=last,
            suite=suite.items,
            pacing=state.pacing() if state else None,
            now=time.time(),
        )
        if as_json:
            typer.echo(json.dumps(result.to_json(), indent=2))
            return
        rounds, decisions = (state.rounds(10), state.decisions(20)) if state else ([], [])
    finally:
        if state is not None:
            state.close()
    typer.echo(render_status(result))
    typer.echo(render_watch(flywheel.approval, rounds, decisions))


def render_watch(
    approval: ApprovalConfig, rounds: list[RoundRow], decisions: list[Decision]
) -> str:
    """Approvals, recent rounds and decisions, in `render_status`'s layout."""

    def line(label: str, text: str) -> str:
        return f"{label:<10} {text}"

    need = {True: "needs tuneloop approve", False: "automatic"}
    out = [line("approval", f"spend {need[approval.spend]}; promotion {need[approval.promote]}")]
    if not rounds:
        out.append(line("rounds", "none yet (tuneloop watch starts them)"))
    for i, r in enumerate(rounds):
        when = iso(r.started_at or r.created_at)
        text = f"{r.round_id}  {r.status:<17} {','.join(r.trigger.fired):<18} {when}"
        if r.status in ("finished", "refused"):
            text += f"  exit {r.exit_code}, {r.wall_s:.0f} s: {r.outcome}"
        elif r.status == "awaiting_approval":
            text += f"  estimated {r.trigger.estimate.text()}"
        out.append(line("rounds" if i == 0 else "", text))
    for i, d in enumerate(decisions):
        out.append(line("decisions" if i == 0 else "", f"{iso(d.at)} {d.kind}: {d.message}"))
    return "\n".join(out)
