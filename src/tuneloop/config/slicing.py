"""How a suite is cut: `suite.slices` fractions, `suite.rolling`, and their command-line spelling.

    suite:
      path: flywheel_suite.jsonl
      slices: {dev: 0.5, gate: 0.5}         # or, on the command line, --slices dev=0.5,gate=0.5
      rolling: {audit_fraction: 0.2, gate_size: 50, seed: 0}

Models only (the rules that turn them into item ids are `tuneloop.suite.slices` and
`tuneloop.suite.rolling`). With `rolling`, the suite's slice names are also `audit` and
`gate-000`, `gate-001`, …; each round of the flywheel takes the next gate slice whose items no
verdict has looked at. Stratification follows `stratify_by_tag`.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from tuneloop.config.base import Section
from tuneloop.errors import InputError


def parse_slice_fractions(text: str, option: str = "--slices") -> dict[str, float]:
    """`dev=0.5,gate=0.5` → {"dev": 0.5, "gate": 0.5}; errors name the command-line option."""
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        name = name.strip()
        try:
            fraction = float(value)
        except ValueError:
            sep = ""
        if not sep or not name:
            raise InputError(f"{option}: expected NAME=FRACTION[,NAME=FRACTION…] (got {part!r})")
        if name in out:
            raise InputError(f"{option}: slice {name!r} is given twice")
        if not 0 < fraction <= 1:  # also refuses nan
            raise InputError(f"{option}: the fraction of slice {name!r} must lie in (0, 1]")
        out[name] = fraction
    return out


class RollingConfig(Section):
    """`suite.rolling`: the one-time split of a suite into an audit part and one-look gate
    slices."""

    audit_fraction: float = Field(default=0.2, ge=0, lt=1)
    """Fraction of the suite held back as the audit part: reported every round, never a gate
    slice."""
    validation_fraction: float = Field(default=0.0, ge=0, lt=1)
    """Fraction of the suite held back as the `validation` part, where a portfolio's
    challengers are compared (`portfolio.selection.slice: validation`): never a gate slice,
    never audited; 0: none."""
    gate_size: int = Field(default=50, ge=1)
    """Items per gate slice; each round's gate looks at one fresh slice of this size."""
    seed: int = 0
    """Seed of the one-time split; a new seed is a new split of the same items."""


class SlicingConfig(Section):
    """How a suite is scored by default and cut into slices (shared by `suite:` and the CLI)."""

    default_scorer: str = "numeric"
    """Scorer for items that do not name one."""
    slices: dict[str, float] = {"dev": 0.5, "gate": 0.5}
    """Named deterministic slices by id hash, as fractions of the suite that sum to ≤ 1."""
    stratify_by_tag: bool = False
    """Draw each slice's fraction within every tag separately."""
    rolling: RollingConfig | None = None
    """A one-time split into an `audit` part and one-look gate slices `gate-000`, `gate-001`,
    … (the flywheel's rounds); None uses only the `slices` fractions."""

    @field_validator("slices", mode="before")
    @classmethod
    def _slices_text(cls, value: Any) -> Any:
        """Also accept `dev=0.5,gate=0.5` (the command-line spelling)."""
        if not isinstance(value, str):
            return value
        try:
            return parse_slice_fractions(value, "slices")
        except InputError as err:
            raise ValueError(str(err).removeprefix("slices: ")) from None

    @field_validator("slices")
    @classmethod
    def _fractions(cls, slices: dict[str, float]) -> dict[str, float]:
        # the field's own rule: its error names `suite.slices` (and its line or override),
        # and the other settings are still checked beside it
        bad = {k: v for k, v in slices.items() if not 0 < v <= 1}
        if bad:
            raise ValueError(f"slice fractions must be in (0, 1] (got {bad})")
        total = sum(slices.values())
        if total > 1 + 1e-9:
            raise ValueError(f"slice fractions must sum to ≤ 1 (got {total:g})")
        return slices
