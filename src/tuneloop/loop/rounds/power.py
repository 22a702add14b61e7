"""Whether the next round's gate can detect the improvement asked of it, before it spends compute.

    power = next_round_power(cfg, config_path, pilot)     # read-only: previews the round
    if power.held: ...refuse the round ("needs N more gate items")

The figure is the one `tuneloop check` warns with (`loop.preflight.gate_power`): the minimum
detectable effect (MDE) of a one-sided paired test at 80% power (Miller 2024), over the items
the round's gate will judge — the fresh items of the gate slice the round would take — at the
α the round's bar will carry (`gate.sequence`'s α_k for the next round, else `gate.alpha`).
The spread of item differences comes from the pilot: the champion's own per-item scores in its
last sample log (the latest round's champion arm), with the challenger assumed as spread and
correlated ρ = 0.5 — `tuneloop power`'s one-pilot assumption; without a pilot, the largest
spread two pass/fail arms can have (conservative: it holds more rounds, never fewer).

A round is held when MDE > `flywheel.triggers.power_factor` × the target effect
(`flywheel.triggers.target_effect`, else `gate.margin`): a gate that would most often call a
real improvement of that size "not significant" is compute spent on a decision it cannot
make. The hold names what releases it: the gate items needed (a larger `suite.rolling.gate_size`,
items with new ids in the suite) or a new suite revision. A margin of 0 with no target sets no
effect to detect: the MDE is reported and nothing is held. A gate scored by a calibrated LLM
judge is powered in true pass rate: the MDE divided by the judge's Youden J.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from tuneloop.config import LoopConfig
from tuneloop.errors import InputError
from tuneloop.gate.ledger import open_ledger
from tuneloop.loop.integrity import next_gate_items
from tuneloop.loop.layout import RunLayout, ledger_path
from tuneloop.loop.preflight.gate_power import POWER, gate_items_needed, gate_mde, pilot_spread
from tuneloop.loop.preflight.judge import gate_attenuation
from tuneloop.loop.rounds.lineage import round_config, round_layout
from tuneloop.loop.rounds.preview import preview_round
from tuneloop.samplelog import SUMMARY_FILE


class GatePower(BaseModel):
    """The next round's gate power, as the triggers, `status` and `run --round` state it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    slice: str
    """The gate slice the round would take (`gate-NNN`)."""
    items: int
    """Its fresh items: what the gate would judge."""
    alpha: float
    """The one-sided α the round's bar would carry."""
    power: float = POWER
    sd_diff: float
    """Standard deviation of item differences the MDE is computed with."""
    source: str
    """Where `sd_diff` came from (the pilot log, or the assumption)."""
    mde: float
    """Minimum detectable effect at `alpha` with `power` on `items` items."""
    target: float | None
    """The improvement a round must be able to detect; None: none set (margin 0)."""
    factor: float | None
    """`flywheel.triggers.power_factor`; None: power never holds a round."""
    needed: int | None = None
    """Gate items at which the MDE would be within `factor` × `target`."""
    held: bool = False
    """The round is held for power."""

    def text(self) -> str:
        """One line: the MDE with what it is judged against, and what releases a hold."""
        mde = (
            f"gate {self.slice}: MDE {self.mde:.3f} on {self.items} fresh items "
            f"(one-sided α {self.alpha:.3g}, {self.power:.0%} power, sd of item differences "
            f"{self.sd_diff:.3f})"
        )
        if self.target is None:
            return f"{mde}; no target effect (gate.margin 0, flywheel.triggers.target_effect unset)"
        if self.factor is None:
            return f"{mde}; target {self.target:g}, power holds nothing (power_factor null)"
        bound = self.factor * self.target
        if not self.held:
            return f"{mde} ≤ {self.factor:g} × target {self.target:g}"
        more = (self.needed or 0) - self.items
        return (
            f"{mde} > {self.factor:g} × target {self.target:g} = {bound:.3g}: needs {more} more "
            f"gate items ({self.needed} per slice: raise suite.rolling.gate_size and add items "
            "with new ids to the suite) or a new suite revision; "
            "flywheel.triggers.power_factor: null runs underpowered rounds"
        )


def round_power(rcfg: LoopConfig, pilot: Path | None, alpha: float) -> GatePower:
    """The power of the round whose config is `rcfg` (`round_config`), from `pilot`."""
    triggers = rcfg.flywheel.triggers
    items = len(next_gate_items(rcfg))
    sd, source = pilot_spread(pilot, rcfg.gate.metric)
    judge = gate_attenuation(rcfg)  # an LLM judge's error: the MDE in true pass rate
    j = 1.0 if judge is None else judge.j
    mde = gate_mde(items, sd, alpha) / j if items and j > 0 else float("inf")
    if judge is not None:
        source += f"; through {judge.source}"
    target = triggers.target_effect or (rcfg.gate.margin or None)
    factor = triggers.power_factor
    judged = target is not None and factor is not None
    held = judged and mde > factor * target  # type: ignore[operator]
    needed = None
    if judged and j > 0:
        needed = gate_items_needed(factor * target * j, sd, alpha)  # type: ignore[operator]
    return GatePower(
        slice=rcfg.gate.slice,
        items=items,
        alpha=alpha,
        sd_diff=sd,
        source=source,
        mde=mde,
        target=target,
        factor=factor,
        needed=needed,
        held=held,
    )


def next_alpha(cfg: LoopConfig) -> float:
    """The α the next round's bar will carry: `gate.sequence`'s next α_k, else `gate.alpha`;
    InputError when the next round's seal would be refused (the sequence's α is spent)."""
    from tuneloop.gate.sequence import alpha_budget

    budget = alpha_budget(cfg.gate, ledger_path(cfg))
    if budget.refusal or budget.next_alpha <= 0:
        raise InputError(f"gate.sequence (config): {budget.refusal or 'no α left'}")
    return budget.next_alpha


def next_round_power(cfg: LoopConfig, config_path: Path, pilot: Path | None) -> GatePower:
    """The next round's power, previewed (reads the suite and ledger; writes nothing).
    InputError when no round could start (no fresh gate slice, no champion)."""
    rcfg = round_config(cfg, preview_round(cfg, config_path))
    return round_power(rcfg, pilot, next_alpha(cfg))


def champion_log(round_workdir: Path, promoted: bool) -> Path | None:
    """The sample log of the champion a round leaves, where it exists: `eval_post/` when it
    promoted, else `eval_pre/` (both cover `audit+gate-NNN`)."""
    run = RunLayout(round_workdir)
    log = run.eval_post if promoted else run.eval_pre
    return log if (log / SUMMARY_FILE).is_file() else None


def champion_pilot(cfg: LoopConfig) -> Path | None:
    """The pilot of the next round: the champion's log of the latest ledger round that left
    one (read-only; None before any)."""
    db = ledger_path(cfg)
    if not db.is_file():
        return None
    with open_ledger(db) as ledger:
        rounds = ledger.rounds()
    for r in reversed(rounds):
        outcome = r.last.outcome if r.last else None
        log = champion_log(round_layout(cfg, r.round_id).workdir, outcome == "promoted")
        if log is not None:
            return log
    return None


def check_round_power(cfg: LoopConfig, rcfg: LoopConfig) -> GatePower:
    """`run --round`'s check of a new round (`rcfg`, its config): InputError when held."""
    power = round_power(rcfg, champion_pilot(cfg), next_alpha(cfg))
    if power.held:
        raise InputError(
            f"flywheel.triggers.power_factor (config): the round is held for power: {power.text()}"
        )
    return power
