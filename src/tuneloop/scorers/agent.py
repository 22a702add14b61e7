"""Agent scorers: the answer, the tool calls, and the cost of an agent trajectory.

Each is registered with `trajectory=True`: the eval hands it the sample's `AgentTrace`, and
training may hand it text or a list of chat messages (`tuneloop.envs.trajectory.as_trace`).
As every score, each lies in [0, 1] with 1 the best, and the counts behind it are in `detail`:

- `agent_answer`: the final answer scored by `answer_scorer` (the item's own `answer_scorer`
  overrides the factory's, default `numeric`); an unfinished trajectory scores 0;
- `tool_call_valid`: share of calls that were well formed — JSON arguments, a tool the item
  offers, arguments valid against its JSON schema (a call whose tool then raised was valid);
- `tool_match`: share of the item's `expected_tools` (`[{"name", "arguments"?}]`) that some
  valid call matches (same name; same arguments, as canonical JSON, when given);
- `redundant_calls`: 1 − share of calls repeating an earlier call's signature;
- `failed_calls`: 1 − share of calls whose tool raised;
- `turns`: 1 for an answer in one turn, falling by 1/max_turns per further turn; 0 unfinished;
- `tokens`: 1 − tokens used / budget (the loop's `token_budget`, else the factory's `budget`),
  floored at 0; 0 unfinished.

Deliberately, a score with nothing to judge is 1 (no calls: none invalid, none redundant; an
item naming no expected tools: nothing missed), with the reason in `detail`, so that a metric
is averaged over every item; restrict it with a tag where that dilutes it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from tuneloop.envs import as_trace, call_signature
from tuneloop.plugins import Score, ScoreFn
from tuneloop.registry import scorers
from tuneloop.samplelog import AgentTrace, ToolCall
from tuneloop.scorers.base import reads_trajectory, scorer
from tuneloop.scorers.resolve import ResolvedScorer

_WELL_FORMED = ("ok", "failed")


def unfinished(trace: AgentTrace) -> Score:
    return Score(0.0, {"reason": f"unfinished: stopped by {trace.stop}", "turns": trace.turns})


def score_sample(resolved: ResolvedScorer, item: dict[str, Any], trace: AgentTrace) -> Score:
    """One scorer on one agent sample: the trace to a trajectory scorer, else the final
    answer of a finished trajectory (an unfinished one scores 0 without reaching it)."""
    if resolved.trajectory:
        return resolved.fn(item, trace)  # type: ignore[arg-type]
    if not trace.finished:
        return unfinished(trace)
    return resolved.fn(item, trace.answer)


def _share_not(
    calls: list[ToolCall], bad: list[ToolCall], label: str, error: Callable[[ToolCall], str]
) -> Score:
    """1 − share of `calls` that are `bad` (1 with no calls), the first 10 errors in detail."""
    if not calls:
        return Score(1.0, {"calls": 0, "reason": "no tool calls"})
    detail: dict[str, Any] = {"calls": len(calls), label: len(bad)}
    if bad:
        detail["errors"] = [error(c) for c in bad][:10]
    return Score(1 - len(bad) / len(calls), detail)


def _signature(call: ToolCall) -> str:
    return call_signature(call.name, call.arguments if call.status != "invalid_json" else None)


@scorer("agent_answer", trajectory=True)
def agent_answer(answer_scorer: str = "numeric") -> ScoreFn:
    """The final answer of a finished trajectory, scored by `answer_scorer`.

    Not registered inline: the answer scorer may be a slow one (`python_tests`)."""
    built: dict[str, Any] = {}

    def score(item: dict[str, Any], completion: Any) -> Score:
        trace = as_trace(completion, item)
        if not trace.finished:
            return unfinished(trace)
        name = item.get("answer_scorer") or answer_scorer
        if name not in built:
            factory = scorers.get(name)
            if reads_trajectory(factory):
                return Score(0.0, {"reason": f"answer scorer {name!r} is an agent scorer"})
            built[name] = factory()
        result: Score = built[name](item, trace.answer)
        return Score(result.value, {**result.detail, "answer_scorer": name})

    return score


@scorer("tool_call_valid", inline=True, trajectory=True)
def tool_call_valid() -> ScoreFn:
    """Share of well-formed tool calls."""

    def score(item: dict[str, Any], completion: Any) -> Score:
        calls = as_trace(completion, item).calls
        bad = [c for c in calls if c.status not in _WELL_FORMED]
        return _share_not(calls, bad, "invalid", lambda c: f"{c.id}: {c.status}: {c.error}")

    return score


@scorer("tool_match", inline=True, trajectory=True)
def tool_match() -> ScoreFn:
    """Share of the item's `expected_tools` matched by a well-formed call."""

    def score(item: dict[str, Any], completion: Any) -> Score:
        expected = item.get("expected_tools") or []
        if not expected:
            return Score(1.0, {"expected": 0, "reason": "the item names no expected tools"})
        calls = [c for c in as_trace(completion, item).calls if c.status in _WELL_FORMED]
        made = {call_signature(c.name, c.arguments) for c in calls}
        names = {c.name for c in calls}
        missed = [
            e["name"]
            for e in expected
            if not (
                call_signature(e["name"], e["arguments"]) in made
                if "arguments" in e
                else e["name"] in names
            )
        ]
        detail: dict[str, Any] = {"expected": len(expected), "matched": len(expected) - len(missed)}
        if missed:
            detail["missed"] = missed
        return Score(1 - len(missed) / len(expected), detail)

    return score


@scorer("redundant_calls", inline=True, trajectory=True)
def redundant_calls() -> ScoreFn:
    """1 − share of calls that repeat an earlier call (same name and arguments)."""

    def score(item: dict[str, Any], completion: Any) -> Score:
        calls = as_trace(completion, item).calls
        if not calls:
            return Score(1.0, {"calls": 0, "reason": "no tool calls"})
        repeats = sum(n - 1 for n in Counter(_signature(c) for c in calls).values())
        return Score(1 - repeats / len(calls), {"calls": len(calls), "redundant": repeats})

    return score


@scorer("failed_calls", inline=True, trajectory=True)
def failed_calls() -> ScoreFn:
    """1 − share of calls whose tool raised."""

    def score(item: dict[str, Any], completion: Any) -> Score:
        calls = as_trace(completion, item).calls
        failed = [c for c in calls if c.status == "failed"]
        return _share_not(calls, failed, "failed", lambda c: f"{c.id}: {c.error}")

    return score


@scorer("turns", inline=True, trajectory=True)
def turns() -> ScoreFn:
    """1 for a one-turn answer, 1/max_turns for an answer in the last turn, 0 unfinished."""

    def score(item: dict[str, Any], completion: Any) -> Score:
        trace = as_trace(completion, item)
        if not trace.finished:
            return unfinished(trace)
        value = max(0.0, 1 - (trace.turns - 1) / trace.max_turns)
        return Score(value, {"turns": trace.turns, "max_turns": trace.max_turns})

    return score


@scorer("tokens", inline=True, trajectory=True)
def tokens(budget: int = 4096) -> ScoreFn:
    """1 − tokens used / budget, floored at 0; 0 unfinished."""

    def score(item: dict[str, Any], completion: Any) -> Score:
        trace = as_trace(completion, item)
        if not trace.finished:
            return unfinished(trace)
        limit = trace.token_budget or budget
        value = max(0.0, 1 - trace.tokens / limit)
        return Score(value, {"tokens": trace.tokens, "budget": limit})

    return score
