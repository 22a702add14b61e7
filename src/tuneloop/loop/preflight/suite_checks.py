"""Preflight of the suite: every item's scorer, and the eval and gate slices.

`load_checked_suite` reads the suite as a run will (every unknown item scorer reported at
once, with its line; an unknown default scorer is its own key's finding, so a stand-in lets
the slice checks run); `check_slices` checks eval.slice and gate.slice against it and returns
the gate slice's size, which the power warning (`gate_power.py`) needs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from tuneloop.errors import InputError, did_you_mean
from tuneloop.loop.preflight.findings import Findings
from tuneloop.registry import scorers
from tuneloop.suite import Suite, load_suite, resolve_slice

if TYPE_CHECKING:
    from tuneloop.config import LoopConfig


def _unknown_item_scorers(path: Path) -> list[str]:
    """`file:line: unknown scorer …` for every item naming one (load_suite stops at the first)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []  # load_suite reports it
    out = []
    # lines end at "\n" only, as load_suite counts them (JSON strings may hold U+2028)
    for lineno, line in enumerate(text.split("\n"), start=1):
        try:
            raw = json.loads(line) if line.strip() else None
        except ValueError:
            continue  # load_suite reports bad JSON with its line
        name = raw.get("scorer") if isinstance(raw, dict) else None
        if isinstance(name, str) and name not in scorers:
            out.append(
                f"{path}:{lineno}: unknown scorer {name!r}{did_you_mean(name, scorers.names())}"
            )
    return out


def load_checked_suite(cfg: LoopConfig, found: Findings) -> Suite | None:
    """The suite, read as the run will read it; None (with the finding) when it cannot be:
    items naming unknown scorers (every one, with its line), or a suite load_suite refuses."""
    path = cfg.suite.path
    if not path.is_file() or not os.access(path, os.R_OK):
        return None  # reported by the path checks (checks.py)
    unknown = _unknown_item_scorers(path)
    if unknown:
        found.error("suite.path", "\n    ".join(["items name unknown scorers:", *unknown]))
        return None
    # An unknown default scorer is reported under its own key; a known stand-in lets the
    # slice checks run (scorer names never move an item between slices).
    default = cfg.suite.default_scorer
    if default not in scorers:
        default = scorers.names()[0]
    try:
        return load_suite(path, default)
    except InputError as err:
        found.error("suite.path", str(err))
        return None


def _slice(cfg: LoopConfig, suite: Suite, key: str, name: str, found: Findings) -> set[str] | None:
    fractions = cfg.suite.slices
    if cfg.suite.rolling is None and any(part not in fractions for part in name.split("+")):
        part = next(p for p in name.split("+") if p not in fractions)
        known = ", ".join(sorted(fractions)) or "none"
        found.error(
            key,
            f"unknown slice {part!r}{did_you_mean(part, fractions)}; suite.slices has: {known}",
        )
        return None
    try:
        return set(resolve_slice(suite, cfg.suite, name))
    except InputError as err:  # a rolling name out of range, or no slice fits
        found.error(key, str(err))
        return None


def check_slices(cfg: LoopConfig, suite: Suite, found: Findings) -> int:
    """Check eval and gate slices; the gate slice's size (0 when it cannot be judged)."""
    e, g = cfg.eval.slice, cfg.gate
    evaluated = (
        {i.id for i in suite.items} if e is None else _slice(cfg, suite, "eval.slice", e, found)
    )
    if evaluated is not None and not evaluated:
        found.error("eval.slice", f"slice {e!r} has no items in {suite.path}")
        return 0
    if not g.enabled:
        return 0
    gate = _slice(cfg, suite, "gate.slice", g.slice, found)
    if gate is None or evaluated is None:
        return 0
    if not gate <= evaluated:
        found.error(
            "eval.slice",
            f"evaluates only slice {e!r}, but the gate decides on slice {g.slice!r}, whose "
            f"items would not be evaluated; leave eval.slice unset to evaluate the whole suite",
        )
    elif not evaluated - gate:
        found.error(
            "gate.slice",
            f"the report uses every evaluated item except the gate slice {g.slice!r}, and none "
            f"is left ({len(evaluated)} evaluated, all in the gate slice); evaluate the whole "
            "suite (eval.slice unset) with another slice in suite.slices",
        )
    if len(gate) < g.min_items:
        found.error(
            "gate.min_items",
            f"the gate slice {g.slice!r} has {len(gate)} items, fewer than min_items "
            f"{g.min_items}: the gate could only reject; enlarge suite.slices.{g.slice} or "
            "the suite",
        )
    return len(gate)
