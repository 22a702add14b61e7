"""A validation slice — where a round chooses something before the gate judges it (a
portfolio's selection, a cascade's thresholds) — must exist, have items, and never share an
item with the gate slice.

    problems = validation_slice_problems(cfg, suite, "dev", "cascade.slice", "the thresholds")

With `suite.rolling` the only such slice is the rolling split's `validation` part (no round's
gate ever takes it; `suite.rolling.validation_fraction`). Otherwise the slice is resolved and
compared item by item with `gate.slice`.
"""

from __future__ import annotations

from tuneloop.config import LoopConfig
from tuneloop.errors import InputError
from tuneloop.suite import Suite, resolve_slice
from tuneloop.suite.rolling import VALIDATION


def validation_slice_problems(
    cfg: LoopConfig, suite: Suite, name: str, key: str, what: str
) -> list[tuple[str, str]]:
    """(config key, message) for each reason `name` cannot be the slice `what` is chosen on."""
    gate = cfg.gate.slice
    rolling = cfg.suite.rolling
    if rolling is not None:  # the rounds' gate slices are the rolling split's
        if name != VALIDATION or rolling.validation_fraction == 0:
            return [
                (
                    key,
                    f"{name!r}: with suite.rolling {what} are chosen on its `validation` part, "
                    "the one slice no round's gate ever takes; set "
                    f"suite.rolling.validation_fraction (e.g. 0.2) and {key}: validation",
                )
            ]
        return []
    if name == gate:
        return [
            (
                key,
                f"{name!r} is the gate slice: {what} are chosen on a validation slice, and "
                "only the choice meets the gate slice (add e.g. `validation: 0.2` to "
                "suite.slices, or suite.rolling.validation_fraction)",
            )
        ]
    try:
        chosen = set(resolve_slice(suite, cfg.suite, name))
        judged = set(resolve_slice(suite, cfg.suite, gate))
    except InputError as err:
        return [(key, str(err))]
    if not chosen:
        return [(key, f"slice {name!r} has no items")]
    shared = chosen & judged
    if shared:
        return [
            (
                key,
                f"slice {name!r} shares {len(shared)} items with the gate slice {gate!r} (e.g. "
                f"{sorted(shared)[0]!r}); a validation slice must never overlap the slice the "
                "gate looks at once",
            )
        ]
    return []
