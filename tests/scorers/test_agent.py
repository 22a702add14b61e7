"""Agent scorers on traces, on text and on chat messages (what GRPO hands a reward)."""

from __future__ import annotations

from typing import Any

import pytest

from tuneloop.registry import scorers
from tuneloop.samplelog import AgentTrace, ToolCall
from tuneloop.scorers.base import reads_trajectory, runs_inline
from tuneloop.scorers.resolve import ScorerResolver

AGENT = ["agent_answer", "tool_call_valid", "tool_match", "redundant_calls", "failed_calls"]
ITEM: dict[str, Any] = {
    "tools": ["calculator"],
    "answer": "42",
    "expected_tools": [{"name": "calculator", "arguments": {"expression": "6*7"}}],
}


def _call(status: str = "ok", expression: str = "6*7", turn: int = 0) -> ToolCall:
    return ToolCall(
        turn=turn,
        id=f"c{turn}",
        name="calculator",
        arguments={"expression": expression},
        status=status,  # type: ignore[arg-type]
    )


def _trace(calls: list[ToolCall], answer: str = "The answer is 42.", **kw: Any) -> AgentTrace:
    return AgentTrace(
        messages=[{"role": "assistant", "content": answer}],
        calls=calls,
        turns=len({c.turn for c in calls}) + 1,
        **kw,
    )


def _score(name: str, completion: Any, item: dict[str, Any] = ITEM, **kw: Any) -> float:
    return float(scorers.get(name)(**kw)(item, completion).value)


@pytest.mark.parametrize("name", [*AGENT, "turns", "tokens"])
def test_registered_as_trajectory_scorers(name: str) -> None:
    factory = scorers.get(name)
    assert reads_trajectory(factory)
    assert runs_inline(factory) == (name != "agent_answer")  # its answer scorer may be slow
    assert ScorerResolver("numeric").named(name).trajectory


def test_a_clean_trajectory_scores_one_everywhere() -> None:
    trace = _trace([_call()], prompt_tokens=100, completion_tokens=24)
    assert [_score(n, trace) for n in AGENT] == [1.0] * 5
    assert _score("turns", trace) == pytest.approx(1 - 1 / 8)
    assert _score("tokens", trace, budget=1000) == pytest.approx(1 - 124 / 1000)
    assert _score("tokens", trace.model_copy(update={"token_budget": 248})) == 0.5


def test_call_problems_each_show_in_their_scorer() -> None:
    calls = [
        _call("invalid_json", turn=0),
        _call("failed", "1/0", turn=1),
        _call(turn=2),
        _call(turn=3),
    ]
    trace = _trace(calls)
    assert _score("tool_call_valid", trace) == 0.75
    assert _score("failed_calls", trace) == 0.75
    assert _score("redundant_calls", trace) == 0.75  # the fourth repeats the third
    assert _score("tool_match", trace) == 1.0
    assert _score("tool_match", _trace([_call(expression="7*6")])) == 0.0
    detail = scorers.get("tool_match")()(ITEM, _trace([])).detail
    assert detail == {"expected": 1, "matched": 0, "missed": ["calculator"]}


def test_an_unfinished_trajectory_scores_zero_on_answer_turns_and_tokens() -> None:
    trace = _trace([_call()], stop="max_turns")
    for name in ("agent_answer", "turns", "tokens"):
        result = scorers.get(name)()(ITEM, trace)
        assert result.value == 0.0 and "unfinished: stopped by max_turns" in result.detail["reason"]


def test_agent_answer_uses_the_item_s_answer_scorer() -> None:
    item = {**ITEM, "answer": "forty-two", "answer_scorer": "exact"}
    assert _score("agent_answer", _trace([], answer="forty-two"), item) == 1.0
    assert _score("agent_answer", _trace([], answer="42")) == 1.0
    result = scorers.get("agent_answer")(answer_scorer="tool_match")(ITEM, "42")
    assert result.value == 0.0 and "is an agent scorer" in result.detail["reason"]


def test_usable_as_rewards_on_text_and_on_messages() -> None:
    # GRPO passes text (one turn, no calls) or the conversation after the prompt
    assert _score("agent_answer", "The answer is 42.") == 1.0
    assert _score("tool_match", "The answer is 42.") == 0.0
    messages = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "a",
                    "function": {"name": "calculator", "arguments": '{"expression": "6*7"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "42"},
        {"role": "assistant", "content": "The answer is 42."},
    ]
    assert [_score(n, messages) for n in AGENT] == [1.0] * 5
    assert _score("turns", messages) == pytest.approx(1 - 1 / 8)


def test_nothing_to_judge_scores_one_with_the_reason() -> None:
    for name in ("tool_call_valid", "redundant_calls", "failed_calls"):
        assert scorers.get(name)()(ITEM, _trace([])).detail["reason"] == "no tool calls"
    result = scorers.get("tool_match")()({"tools": ["calculator"]}, _trace([]))
    assert result.value == 1.0 and result.detail["expected"] == 0
