"""A round seen before it exists: what `tuneloop check` and `tuneloop run` preflight.

A flywheel config (`base_model: champion`, or any config run with `--round`) is checked as
the config of its next round (`preview_round`, `round_config`), not as written: its base model
is the champion's folder and its slices the round's. Previewing reads the ledger and writes
nothing — a missing ledger is read as an empty one, never created. `preflight_errors` hands
those checks to `load_config`, so that a config whose schema fails reports its preflight
errors in the same report (`tuneloop.config.load`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tuneloop.config import LoopConfig
from tuneloop.errors import InputError
from tuneloop.loop.layout import ledger_path
from tuneloop.loop.preflight import preflight
from tuneloop.loop.rounds.lineage import (
    RoundRecord,
    bootstrap_descriptor,
    next_round_id,
    plan_round,
    round_config,
)


def preview_round(
    cfg: LoopConfig,
    config_path: Path,
    round_id: str | None = None,
    trigger: dict[str, Any] | None = None,
) -> RoundRecord:
    """Round `round_id`'s plan (default: the next round's): like `plan_round`, but a missing
    ledger is read as an empty one (never created)."""
    round_id = round_id or next_round_id(cfg)
    if ledger_path(cfg).exists() or cfg.suite.rolling is None:  # the latter's error names it
        return plan_round(cfg, config_path, round_id, trigger or {})
    parent = bootstrap_descriptor(cfg, hashed=False)
    return RoundRecord(
        round_id=round_id,
        started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        config_path=str(config_path),
        parent_version=1,
        parent=parent,
        bootstrap=True,
        base_model=str(parent["path"]),
        gate_slice="gate-000",
        eval_slice="audit+gate-000",
        trigger=trigger or {},
    )


def checked_config(
    cfg: LoopConfig, config_path: Path, *, as_round: bool = False
) -> tuple[LoopConfig, RoundRecord | None]:
    """The config the preflight checks: `cfg`, or for a round (`base_model: champion`, or
    `as_round`: `run --round`) the next round's config, with that round's record."""
    if not as_round and cfg.base_model != "champion":
        return cfg, None
    record = preview_round(cfg, config_path)
    return round_config(cfg, record), record


def preflight_errors(
    config_path: Path, *, as_round: bool = False
) -> Callable[[LoopConfig], list[tuple[str, str]]]:
    """`load_config`'s `semantic` for `check` and `run`: the preflight's errors, as (key,
    message), on the config a run would check (`checked_config`)."""

    def semantic(cfg: LoopConfig) -> list[tuple[str, str]]:
        try:
            checked, _ = checked_config(cfg, config_path, as_round=as_round)
        except InputError as err:
            return [("base_model", str(err))]
        return [(e.key, e.message) for e in preflight(checked).errors]

    return semantic
