"""One teacher call turned into a `ReplayCall`: parse the answer, score it, price it.

Pure apart from the scorer itself. A 200 whose body is not an assistant answer — not JSON,
no `choices[0].message`, content that is neither text nor absent-with-tool-calls — is the
teacher's fault, not the network's: it becomes a `malformed` row scored 0 with the reason,
and counts against the teacher. Which scorer a step gets: its verifier's (`plan.py`), else
the judge, which sees the prefix as `messages` and — as `answer` — the original response,
unless it is the LLM judge in grade mode (`judging.py` says why); without either the row is
`unscored`. A scorer that raises (an LLM judge's `JudgeError` too) gives a `scorer_error`
row, which is not counted for or against the teacher (as the eval's harness errors).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tuneloop.records.replay import ReplayCall
from tuneloop.replay.judging import JudgeUse
from tuneloop.replay.plan import Step
from tuneloop.replay.teachers import Price
from tuneloop.scorers.resolve import ResolvedScorer


class Malformed(Exception):
    """The teacher answered 200 with something that is not an assistant message."""


@dataclass(frozen=True)
class Answer:
    message: dict[str, Any]
    """The assistant message: `role`, `content` (text or None), `tool_calls` when any."""
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def parse_answer(body: bytes) -> Answer:
    """The assistant message in a chat completion body; Malformed with the reason otherwise."""
    try:
        data = json.loads(body)
        choice = data["choices"][0]
        message = choice["message"]
    except (ValueError, KeyError, IndexError, TypeError) as err:
        raise Malformed(f"response is not a chat completion ({type(err).__name__})") from None
    if not isinstance(message, dict):
        raise Malformed("choices[0].message is not an object")
    content, calls = message.get("content"), message.get("tool_calls")
    if calls is not None and not (isinstance(calls, list) and all(_is_call(c) for c in calls)):
        raise Malformed("tool_calls is not a list of function calls")
    if not isinstance(content, str) and not (content is None and calls):
        raise Malformed(f"content is {type(content).__name__}, not text (and no tool calls)")
    out: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        out["tool_calls"] = [
            {"id": c.get("id"), "type": "function", "function": c["function"]} for c in calls
        ]
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    finish = choice.get("finish_reason")
    return Answer(
        out,
        finish if isinstance(finish, str) else None,
        _count(usage.get("prompt_tokens")),
        _count(usage.get("completion_tokens")),
    )


def _is_call(call: Any) -> bool:
    fn = call.get("function") if isinstance(call, dict) else None
    return isinstance(fn, dict) and isinstance(fn.get("name"), str)


def scoring_item(step: Step, judge: JudgeUse) -> dict[str, Any] | None:
    """The item a scorer is given for this step, or None when nothing can score it."""
    base = {"id": step.key, "messages": step.prefix}
    if step.verifier is not None:
        return {**base, **step.verifier}
    if judge.scorer is None:
        return None
    item = {**base, "scorer": judge.scorer, "scorer_args": dict(judge.args)}
    if judge.mode == "grade":
        return item  # no reference: the original is graded alike (judging.py)
    if judge.mode == "pairwise":
        return {**item, "answer": judge.reads(step.original)}  # the baseline
    return {**item, "answer": step.original.get("content") or ""}


def scored_text(step: Step, message: dict[str, Any], judge: JudgeUse) -> str:
    """What the step's scorer reads of an answer: the LLM judge its text and tool calls,
    any other scorer its text (`response_text`)."""
    if judge.mode is not None and judge.judges(step):
        return judge.reads(message)
    return response_text(message)


def score_text(
    scorer: ResolvedScorer, item: dict[str, Any], text: str, threshold: float
) -> dict[str, Any]:
    """ReplayCall fields of one scored text: status, score, passed, scorer, detail, error."""
    name = scorer.name
    try:
        result = scorer.fn(item, text)
        detail = json.loads(json.dumps(result.detail, default=str))
    except Exception as err:  # a scorer bug must not stop the replay; the row says what broke
        return {
            "status": "scorer_error",
            "scorer": name,
            "error": f"scorer {name!r} raised {type(err).__name__}: {err}"[:500],
        }
    return {
        "status": "ok",
        "score": result.value,
        "passed": result.value >= threshold,
        "scorer": name,
        "detail": detail,
    }


def answered_row(
    base: dict[str, Any], answer: Answer, price: Price, latency_s: float, scored: dict[str, Any]
) -> ReplayCall:
    cost = None
    if answer.prompt_tokens is not None and answer.completion_tokens is not None:
        cost = price.cost(answer.prompt_tokens, answer.completion_tokens)
    return ReplayCall(
        **base,
        **scored,
        response=answer.message,
        finish_reason=answer.finish_reason,
        prompt_tokens=answer.prompt_tokens,
        completion_tokens=answer.completion_tokens,
        cost_usd=cost,
        latency_s=round(latency_s, 6),
    )


def malformed_row(
    base: dict[str, Any], reason: str, latency_s: float, scorer: str | None
) -> ReplayCall:
    """Scored 0 with the reason: the teacher answered, but not with an answer. Its cost is
    unknown (no usable usage) and counted as 0."""
    return ReplayCall(
        **base,
        status="malformed",
        score=0.0,
        passed=False,
        scorer=scorer,
        error=reason,
        latency_s=round(latency_s, 6),
    )


def missing_row(base: dict[str, Any], error: str) -> ReplayCall:
    return ReplayCall(**base, status="missing", error=error)


def response_text(message: dict[str, Any]) -> str:
    """What a scorer reads: the content (tool-call-only answers score their empty text)."""
    content = message.get("content")
    return content if isinstance(content, str) else ""
