"""`tuneloop watch` (the flywheel's daemon) and `tuneloop approve` (what waits for a person).

    tuneloop watch loop.yaml [--once] [--max-rounds N] [--round-command "…{round}…"]
    tuneloop approve ROUND --config loop.yaml      # a watcher round waiting under approval.spend
    tuneloop approve RUN [--ledger ledger.db]      # a promotion waiting (as before)

`watch` unpacks loop.yaml into the watcher's plain inputs (`Site`), takes the one lock
per ledger, opens `<workdir>/flywheel.db` and runs `Watcher`. Exit status: 0 when it
stops as asked (SIGTERM, SIGINT, --once, --max-rounds) — the round it interrupted is saved
and resumes at the next start; 2 for a bad config, a missing traffic path, an unstartable
round command or another watcher holding the ledger (named). `approve` lives here rather
than in `gate` because it must read the watcher's state, and a phase never imports the
flywheel; a gate run id still goes to `gate.command.approve` unchanged.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tuneloop.errors import InputError
from tuneloop.flywheel.exchanges import traffic_files
from tuneloop.flywheel.paths import FlywheelPaths
from tuneloop.flywheel.watch.look import last_round
from tuneloop.flywheel.watch.process import WatchLock, describe_holder, lock_path
from tuneloop.flywheel.watch.round import Site, Work
from tuneloop.flywheel.watch.state import WatchState, open_watch_state
from tuneloop.flywheel.watch.watcher import Watcher

if TYPE_CHECKING:
    from tuneloop.config import LoopConfig
    from tuneloop.suite import Suite

ROUND_PLACEHOLDERS = ("{round}", "{trigger_file}", "{workdir}", "{config}")
ROUND_ID = re.compile(r"r\d{4,}")
SPEND_KEY = re.compile(r"spend-[0-9a-f]{12}")
"""A portfolio round's spend key (`loop.portfolio.approval`)."""
"""A watcher round's id (`r0003`), as `tuneloop run --round` takes it."""


def round_command(template: str | None, config: Path) -> list[str]:
    """The round command's argv template; the default runs this tuneloop's `run --round`."""
    config = config.resolve()
    if template is None:
        return [
            sys.executable,
            *("-m", "tuneloop", "run", str(config)),
            *("--round", "{round}", "--trigger-file", "{trigger_file}"),
        ]
    try:
        argv = shlex.split(template)
    except ValueError as err:
        raise InputError(f"--round-command: cannot split {template!r} ({err})") from None
    if not any("{round}" in arg for arg in argv):
        raise InputError(
            f"--round-command: {template!r} has no {{round}}; the round id must reach the "
            "command (placeholders: " + ", ".join(ROUND_PLACEHOLDERS) + ")"
        )
    return [arg.replace("{config}", str(config)) for arg in argv]


def eval_items(cfg: LoopConfig, suite: Suite) -> int:
    """Items a round evaluates per arm: the audit part plus one gate slice under
    `suite.rolling` (a round's `eval.slice` is `audit+gate-NNN`), else `eval.slice`."""
    from tuneloop.suite import resolve_slice, rolling_of

    if cfg.suite.rolling is not None:
        split = rolling_of(suite, cfg.suite)
        return len(split.audit_ids) + cfg.suite.rolling.gate_size
    if cfg.eval.slice is None:
        return len(suite.items)
    return len(resolve_slice(suite, cfg.suite, cfg.eval.slice))


def audit_part(cfg: LoopConfig, suite: Suite) -> list[str] | None:
    """The audit part's item ids under `suite.rolling` (what the audit accuracy is computed
    on); None without a rolling split (an `--audit-log` is then taken whole)."""
    from tuneloop.suite import rolling_of

    return rolling_of(suite, cfg.suite).audit_ids if cfg.suite.rolling is not None else None


def build_site(cfg: LoopConfig, config: Path, template: str | None) -> Site:
    """The watcher's plain inputs from loop.yaml."""
    from tuneloop.flywheel.prospect import next_round, watched_files
    from tuneloop.loop.layout import ledger_path
    from tuneloop.suite import load_suite

    suite = load_suite(cfg.suite.path, cfg.suite.default_scorer)
    steps = cfg.train.steps + cfg.train.sft_warmup_steps
    return Site(
        workdir=cfg.workdir,
        ledger=ledger_path(cfg),
        suite=suite.items,
        audit_ids=audit_part(cfg, suite),
        train_data=cfg.train.data,
        work=Work(eval_items(cfg, suite), cfg.eval.n_samples, steps),
        round_command=round_command(template, config),
        before=last_round(cfg.workdir, cfg.train.data, None),
        config=config,
        prospect=partial(next_round, cfg, config),
        watched=watched_files(cfg),
    )


def watch(
    config: Annotated[Path, typer.Argument(help="The loop.yaml, with its `flywheel:` section.")],
    once: Annotated[
        bool,
        typer.Option(
            "--once", help="One step: resume the open round, or look once and run at most one."
        ),
    ] = False,
    max_rounds: Annotated[
        int | None,
        typer.Option(min=1, help="Stop after this many rounds have finished or been refused."),
    ] = None,
    round_command_template: Annotated[
        str | None,
        typer.Option(
            "--round-command",
            help="Run rounds with this command instead of `tuneloop run CONFIG --round {round} "
            "--trigger-file {trigger_file}` (placeholders: {round}, {trigger_file}, "
            "{workdir}, {config}); it must keep that command's exit statuses.",
        ),
    ] = None,
) -> None:
    """Watch the traffic and run a round whenever a trigger fires and pacing allows.

    One watcher per gate ledger (a second is refused, naming the holder). State, rounds and
    one line per decision are kept in <workdir>/flywheel.db and printed to stderr; `tuneloop
    status` reads them. SIGTERM or Ctrl-C: the running round is told to checkpoint, recorded
    as interrupted, and resumed by the next `tuneloop watch`. After a kill -9 the next start
    resumes the same round; a trigger never starts two.
    """
    from tuneloop.config import load_config
    from tuneloop.flywheel.service import managed_service, traffic_dir
    from tuneloop.loop.preflight import flywheel_problems
    from tuneloop.loop.rounds import preflight_errors, require_rolling

    # a schema error hides nothing: the round's preflight and the watcher's own checks with it
    round_errors = preflight_errors(config, as_round=True)
    cfg = load_config(config, semantic=lambda c: [*round_errors(c), *flywheel_problems(c)])
    if round_command_template is None:
        require_rolling(cfg)  # else every round it started would be refused
    flywheel = cfg.flywheel
    site = build_site(cfg, config, round_command_template)
    traffic_dir(flywheel)  # a managed proxy's log folder exists before it is checked
    traffic_files(flywheel.traffic)  # a missing traffic path is refused now, not every poll
    assert site.ledger is not None
    with WatchLock(lock_path(site.ledger), time.time()) as lock:
        state = WatchState.open(FlywheelPaths(cfg.workdir).state)
        try:
            service = managed_service(cfg, flywheel, site.ledger)
            watcher = Watcher(
                state, flywheel, site, on_promoted=service.reserve if service else None
            )
            if lock.took_over is not None:
                watcher.note(
                    "lock",
                    f"took over {lock.path} from a watcher that is gone "
                    f"({describe_holder(lock.took_over)})",
                )
            watcher.note(
                "start",
                f"watching {config} (pid {os.getpid()}; poll every {flywheel.poll_s:g} s; "
                f"state {state.path}; lock {lock.path})",
            )
            if service is not None:
                watcher.note("reserve", service.reserve())
            code = watcher.run(once=once, max_rounds=max_rounds)
        finally:
            state.close()
            if service is not None:
                service.close()  # leave the champion serving: clients keep their address
    raise typer.Exit(code)


def approve(
    run: Annotated[
        str,
        typer.Argument(
            help="A gate run id awaiting promotion approval, or (with --config) a watcher "
            "round id, e.g. r0003, awaiting spend approval."
        ),
    ],
    ledger: Annotated[
        Path | None,
        typer.Option(
            "--ledger",
            help="Gate ledger of the promotion; default ledger.db, or the config's gate ledger "
            "with --config.",
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="The watcher's loop.yaml: RUN may be one of its rounds (approval.spend).",
        ),
    ] = None,
) -> None:
    """Say yes to what waits for a person: a promotion, or a watcher round's spend.

    `tuneloop approve RUN [--ledger L]` completes a promotion stopped at awaiting_approval
    (gate.require_approval; the flywheel's approval.promote). `tuneloop approve ROUND --config
    loop.yaml` lets the watcher start a round it holds under approval.spend (it starts within
    seconds); `tuneloop approve spend-KEY --config loop.yaml` approves the spend a portfolio
    round printed (portfolio.approval.spend), and the next `tuneloop run` goes ahead; a RUN
    that is no round of that watcher is approved as a promotion in the config's gate ledger.
    """
    from tuneloop.gate.command import DEFAULT_LEDGER
    from tuneloop.gate.command import approve as approve_promotion

    if config is not None:
        from tuneloop.config import load_config
        from tuneloop.loop.layout import ledger_path

        cfg = load_config(config)
        if SPEND_KEY.fullmatch(run):  # a portfolio round's spend (portfolio.approval.spend)
            _approve_spend(cfg, run)
            return
        state = open_watch_state(cfg.workdir)
        if _approve_round(state, run):
            return
        if ROUND_ID.fullmatch(run):  # a round id, never a gate run id (`<name>-<time>`)
            where = FlywheelPaths(cfg.workdir).state
            raise InputError(
                f"approve {run}: no watcher round {run} in {where}"
                + ("" if state else " (no watcher has run here)")
                + "; a round waits for `tuneloop approve` only under flywheel.approval.spend, "
                "and `tuneloop status CONFIG` lists the rounds"
            )
        ledger = ledger or ledger_path(cfg)
    approve_promotion(run, ledger or DEFAULT_LEDGER)


def _approve_spend(cfg: LoopConfig, key: str) -> None:
    """Approve the spend `key` a portfolio round printed, if the config still makes it."""
    from tuneloop.loop.portfolio import approve_spend, estimate_round
    from tuneloop.loop.portfolio.run import portfolio_challengers
    from tuneloop.loop.state import now_iso

    if cfg.portfolio is None:
        raise InputError(f"approve {key}: the config has no portfolio, so no spend to approve")
    challengers = portfolio_challengers(cfg)
    found = estimate_round(cfg, challengers)
    how = approve_spend(cfg, challengers, found, key, now_iso())
    typer.echo(f"approved {key} ({how}):\n" + "\n".join(found.lines()))


def _approve_round(state: WatchState | None, run: str) -> bool:
    """Approve watcher round `run` in `state`; False when it holds no such round."""
    from tuneloop.gate.promotion import default_user

    if state is None:
        return False
    try:
        if state.round(run) is None:
            return False
        row = state.approve(run, default_user(), time.time())
    finally:
        state.close()
    typer.echo(
        f"approved round {run} ({row.trigger.estimate.text()}); the watcher starts it at its "
        "next look"
    )
    return True
