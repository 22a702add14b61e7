"""What the next round would start with: the corpus steps its new labels must survive, whether
its gate can detect the target effect, and the α its bar may spend.

    nxt = next_round(cfg, config_path, pilot)     # the status command and the watcher's looks
    status = gather_status(..., next_round=nxt)

Read-only: the round is previewed (`loop.rounds.power`), the ledger read without being
created (`gate.sequence.alpha_budget`). A round that could not start at all (no fresh gate
slice, no champion to start from) has no power to state: `power_note` says why, and the round
command refuses it with the same reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tuneloop.config import LoopConfig
from tuneloop.errors import InputError
from tuneloop.gate.sequence import AlphaBudget, alpha_budget
from tuneloop.loop.layout import ledger_path
from tuneloop.loop.rounds.power import GatePower, next_round_power


@dataclass(frozen=True)
class NextRound:
    """The next round's figures and the inputs its growth is counted with."""

    corpus: Path | None
    """`data.corpus`: the corpus build whose steps new labels must survive; None: the loop
    trains on a fixed `train.data`."""
    suites: tuple[Path, ...]
    """Suites new rows are decontaminated against (the loop's own)."""
    power: GatePower | None
    """The next round's gate power; None when no round could start (`power_note`)."""
    power_note: str | None
    alpha: AlphaBudget
    """The flywheel's α: spent, remaining, the next round's."""


def watched_files(cfg: LoopConfig) -> tuple[Path, ...]:
    """Files whose change changes the next round's figures: the suite, the corpus config."""
    return (cfg.suite.path,) if cfg.data.corpus is None else (cfg.suite.path, cfg.data.corpus)


def next_round(cfg: LoopConfig, config_path: Path, pilot: Path | None) -> NextRound:
    """The next round's figures from loop.yaml, with `pilot` (the champion's latest sample
    log) as the spread of its gate's item differences."""
    power, note = None, None
    try:
        power = next_round_power(cfg, config_path, pilot)
    except InputError as err:
        note = f"not measured: {str(err).splitlines()[0]}"
    return NextRound(
        corpus=cfg.data.corpus,
        suites=(cfg.suite.path,),
        power=power,
        power_note=note,
        alpha=alpha_budget(cfg.gate, ledger_path(cfg)),
    )
