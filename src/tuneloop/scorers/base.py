"""Registering scorers, shared by evaluate (scores) and train (GRPO rewards).

A scorer is a small factory registered by name (`@scorer("numeric", inline=True)`) that returns
a callable `score(item, completion) -> Score` (the protocols and `Score` are core:
`tuneloop.plugins`). `item` is the suite item as a plain dict (its
reference fields such as `answer`, `tests`, `choices`, plus any `scorer_args`); `completion`
is untrusted model output. A scorer never raises on bad model output: it returns 0 with a
reason in `detail`.

How a scorer runs is a property of its registration, read by `resolve.py`, never a list of
names elsewhere: `inline=True` says it is fast, pure and returns plain-JSON details, so the
eval may call it on the event loop; any other scorer (the sandboxed `python_tests`, a plugin
registered without the property) runs in a worker thread and has its details made JSON.
A plugin registered through an entry point declares it with an `inline = True` attribute.
`trajectory=True` says the scorer reads a whole agent trajectory: the eval hands it the
sample's `AgentTrace` instead of the final text, and it also accepts text or a list of chat
messages (what training passes; see `tuneloop.envs.trajectory`). Any other scorer sees an
agent sample's final answer, and an unfinished trajectory scores 0 without reaching it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from tuneloop.plugins import ScorerFactory
from tuneloop.registry import scorers

F = TypeVar("F", bound=ScorerFactory)


def scorer(name: str, *, inline: bool = False, trajectory: bool = False) -> Callable[[F], F]:
    """Decorator: register a scorer factory under `name`, with its properties (see above)."""

    def deco(factory: F) -> F:
        factory.inline = inline  # type: ignore[attr-defined]
        factory.trajectory = trajectory  # type: ignore[attr-defined]
        scorers.register(name)(factory)
        return factory

    return deco


def runs_inline(factory: Any) -> bool:
    """Whether a registered factory declared `inline=True` (see the module docstring)."""
    return getattr(factory, "inline", False) is True


def reads_trajectory(factory: Any) -> bool:
    """Whether a registered factory declared `trajectory=True` (see the module docstring)."""
    return getattr(factory, "trajectory", False) is True
