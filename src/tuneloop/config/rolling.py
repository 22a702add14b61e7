"""`suite.rolling`: the one-time split of a suite into an audit part and one-look gate slices.

    suite:
      path: flywheel_suite.jsonl
      rolling: {audit_fraction: 0.2, gate_size: 50, seed: 0}

With it, the suite's slice names are `audit` and `gate-000`, `gate-001`, … (see
`tuneloop.suite_rolling`); each round of the flywheel takes the next gate slice whose items
no verdict has looked at. Stratification follows `suite.stratify_by_tag`.
"""

from __future__ import annotations

from pydantic import Field

from tuneloop.config.base import Section


class RollingConfig(Section):
    audit_fraction: float = Field(default=0.2, ge=0, lt=1)
    """Fraction of the suite held back as the audit part: reported every round, never a gate
    slice."""
    gate_size: int = Field(default=50, ge=1)
    """Items per gate slice; each round's gate looks at one fresh slice of this size."""
    seed: int = 0
    """Seed of the one-time split; a new seed is a new split of the same items."""
