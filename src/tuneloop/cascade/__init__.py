"""Cascades from logs: a tiered system's accuracy and cost composed from each tier's own sample
log (`compose.compose_logs`, `tuneloop compose`), with the rule in `tuneloop.stats.cascade`;
the record it writes is `records.composition.CompositionRecord`.
The face is lazy so that the CLI's help loads no numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tuneloop.lazy import lazy_exports

if TYPE_CHECKING:
    from tuneloop.cascade.compose import Tier, compose_logs

__all__ = ["Tier", "compose_logs"]

__getattr__ = lazy_exports(__name__, {"Tier": "compose", "compose_logs": "compose"})
