"""Which scorer scores an item, and how: the one resolver of evaluate (scores) and train (rewards).

    resolver = ScorerResolver(default="numeric")           # evaluate: the suite default
    resolver = ScorerResolver("numeric", override="exact")  # train: `reward_scorer`, if set
    s = resolver.resolve(item)        # s.name, s.fn(item, completion), s.inline

An item is scored by the override if one is given, else by its own `scorer`, else by the
default. Each (name, factory arguments) pair is built once. Whether a scorer may run inline is
read from its registration (`base.scorer(..., inline=True)`), never from a list of names.

Factory arguments are the caller's to give, and the two callers deliberately differ as they
always have: evaluate builds every scorer with its factory defaults (scorers read the item's
`scorer_args` themselves when scoring), while train's rewards also pass the item's
`scorer_args` to the factory. Settings loop.yaml holds for a scorer (`eval.judge`) reach its
factory through `configured` when the caller gives no arguments.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tuneloop.plugins import ScoreFn
from tuneloop.registry import scorers
from tuneloop.scorers.base import reads_trajectory, runs_inline


@dataclass(frozen=True)
class ResolvedScorer:
    name: str
    """The registered name the item is scored by."""
    fn: ScoreFn
    """`fn(item, completion) -> Score`."""
    inline: bool
    """Registered as fast, pure and plain-JSON: safe to call on the eval's event loop."""
    trajectory: bool = False
    """Registered as reading a whole agent trajectory (see `base.py`)."""


def scorer_name(item: Mapping[str, Any], default: str, override: str | None = None) -> str:
    """The override, else the item's own `scorer`, else the default."""
    return override or item.get("scorer") or default


class ScorerResolver:
    """Hands out the scorer of each item, building each (name, arguments) once."""

    def __init__(
        self,
        default: str,
        *,
        override: str | None = None,
        get: Callable[[str], Any] | None = None,
        configured: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        self.default = default
        self.override = override
        self.configured = dict(configured or {})
        """Factory arguments a scorer gets when the caller gives none: what loop.yaml
        configures for it (`eval.judge` → `{"judge": {"judge": path}}`)."""
        self._get = get or scorers.get  # `get`: a stand-in registry, for tests
        self._built: dict[str, ResolvedScorer] = {}

    def resolve(
        self, item: Mapping[str, Any], args: Mapping[str, Any] | None = None
    ) -> ResolvedScorer:
        """The item's scorer, built with factory arguments `args` (none: its defaults)."""
        return self.named(scorer_name(item, self.default, self.override), args)

    def for_row(self, row: Mapping[str, Any]) -> ResolvedScorer:
        """A training or corpus row's scorer, built with the row's own `scorer_args`."""
        return self.resolve(row, row.get("scorer_args") or {})

    def named(self, name: str, args: Mapping[str, Any] | None = None) -> ResolvedScorer:
        """Scorer `name`, whatever the item names (the eval's further `metrics`)."""
        args = args if args else self.configured.get(name)
        # no arguments (every eval sample): the name is the key, with no JSON encoded per call
        key = f"{name}:{json.dumps(dict(args), sort_keys=True)}" if args else name
        if key not in self._built:
            factory = self._get(name)
            self._built[key] = ResolvedScorer(
                name, factory(**(args or {})), runs_inline(factory), reads_trajectory(factory)
            )
        return self._built[key]
