"""A portfolio round's checks before any compute: `tuneloop check` and the phase's preflight.

`portfolio_problems` (a `tuneloop check` finding each, exit 2): `gate.adjudicate: all` without
a portfolio; a selection slice that is unknown, is the gate slice, or shares an item with it;
a challenger whose overrides do not make a valid recipe (each named with its challenger); a
challenger whose training time cannot be estimated; an estimate over `portfolio.budget`.

`preflight_portfolio` (the `challengers` phase's hook, before the first phase of `tuneloop
run` executes): the same budget refusal, a selection rule that differs from the one sealed for
this round when the phase resumes, and the spend approval (`loop.portfolio.approval`: exit 1
while it waits, with the list and the estimate).
"""

from __future__ import annotations

from pathlib import Path

from tuneloop.config import LoopConfig
from tuneloop.errors import InputError
from tuneloop.gate.ledger import open_ledger
from tuneloop.gate.seal import selection_seal_id, selection_sha256
from tuneloop.loop.layout import ledger_path
from tuneloop.loop.portfolio.approval import approved_how
from tuneloop.loop.portfolio.budget import RoundEstimate, budget_problems, estimate_round
from tuneloop.loop.portfolio.challengers import Challenger, effective_config, expand
from tuneloop.loop.portfolio.run import (
    champion_recipe,
    portfolio_challengers,
    sealed_rule,
    selection_default,
)
from tuneloop.loop.state import load_state, now_iso
from tuneloop.loop.validation_slice import validation_slice_problems
from tuneloop.suite import Suite


def portfolio_problems(cfg: LoopConfig, suite: Suite | None) -> list[tuple[str, str]]:
    """(key, message) for every problem of `portfolio:` and `gate.adjudicate` (module doc)."""
    if cfg.portfolio is None:
        if cfg.gate.adjudicate == "all":
            return [
                ("gate.adjudicate", "all adjudicates a portfolio's challengers; set portfolio:")
            ]
        return []
    out: list[tuple[str, str]] = []
    p = cfg.portfolio
    try:
        challengers = expand(p, *champion_recipe(cfg))
    except InputError as err:
        return [("portfolio.stage", str(err).removeprefix("portfolio.stage: "))]
    for ch in challengers:
        try:
            effective_config(cfg, ch)
        except InputError as err:
            out.append((ch.where, str(err).removeprefix(f"{ch.where}: ")))
    if suite is not None and cfg.gate.enabled:
        out += _slice_problems(cfg, suite)
    if out:
        return out
    try:
        found = estimate_round(cfg, challengers, suite)
    except InputError as err:
        key, _, message = str(err).partition(": ")
        return [(key, message)]
    return budget_problems(cfg, found)


def _slice_problems(cfg: LoopConfig, suite: Suite) -> list[tuple[str, str]]:
    assert cfg.portfolio is not None
    if cfg.gate.adjudicate == "all":
        return []  # the challengers meet the gate slice itself; no selection slice is read
    return validation_slice_problems(
        cfg, suite, cfg.portfolio.selection.slice, "portfolio.selection.slice", "challengers"
    )


def challenger_files(cfg: LoopConfig) -> dict[str, Path]:
    """Each challenger's own given files (its `train.data`, its warm-up rows), hashed into the
    `challengers` phase's fingerprint."""
    if cfg.portfolio is None:
        return {}
    out: dict[str, Path] = {}
    for ch in portfolio_challengers(cfg):
        t = effective_config(cfg, ch).train
        for key, path in (("data", t.data), ("sft_warmup_data", t.sft_warmup_data)):
            if path is not None:
                out[f"{ch.name}:{key}"] = path
    return out


def preflight_portfolio(cfg: LoopConfig, workdir: Path, upstream_unchanged: bool) -> None:
    """Before any phase runs (module doc): budget, a kept seal, the spend approval."""
    challengers = portfolio_challengers(cfg)
    found = estimate_round(cfg, challengers)
    problems = budget_problems(cfg, found)
    if problems:
        raise InputError("\n  ".join(f"{key} (config): {message}" for key, message in problems))
    _check_kept_selection(cfg, workdir, challengers, found)
    approved_how(cfg, challengers, found, now_iso())


def _check_kept_selection(
    cfg: LoopConfig, workdir: Path, challengers: list[Challenger], found: RoundEstimate
) -> None:
    """A round that resumes its `challengers` phase must keep the rule it sealed."""
    state = load_state(workdir)
    db = ledger_path(cfg)
    if state is None or not db.exists():
        return
    with open_ledger(db) as ledger:
        sealed = ledger.sealed(selection_seal_id(state.run_id))
    if sealed is None:
        return
    rule = sealed_rule(cfg, state.run_id, challengers, selection_default(cfg, challengers, found))
    if selection_sha256(rule) != sealed.bar_sha256:
        raise InputError(
            f"portfolio (config): round {state.run_id!r} sealed its selection rule at "
            f"{sealed.sealed_at}, before any challenger was evaluated; the config now asks "
            "for another rule or other challengers. Restore them, or start a new round "
            "(`tuneloop run CONFIG --from challengers`)"
        )
