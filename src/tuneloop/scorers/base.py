"""The scorer protocol, shared by evaluate (scores) and train (GRPO rewards).

A scorer is a small factory registered by name (`@scorers.register("numeric")`) that returns a
callable `score(item, completion) -> Score`. `item` is the suite item as a plain dict (its
reference fields such as `answer`, `tests`, `choices`, plus any `scorer_args`); `completion`
is untrusted model output. A scorer never raises on bad model output: it returns 0 with a
reason in `detail`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Score:
    value: float
    """In [0, 1]."""
    detail: dict[str, Any] = field(default_factory=dict)
    """What was extracted and why it scored as it did."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.value <= 1.0:
            raise ValueError(f"score must be in [0, 1] (got {self.value})")


class ScoreFn(Protocol):
    def __call__(self, item: dict[str, Any], completion: str) -> Score: ...


class ScorerFactory(Protocol):
    def __call__(self, **kwargs: Any) -> ScoreFn: ...
