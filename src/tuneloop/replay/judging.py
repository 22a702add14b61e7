"""The step judge in the replay: what scores a step without a verifier, and what it is shown.

    replay:
      judge: judge                           # the LLM judge (`tuneloop.scorers.judge`)
      judge_args: {judge: judges/agent.yaml}

A step without a verifier — an open-ended answer, most of a real agent session — is scored
by `replay.judge`, a registered scorer, given the prefix as the item's `messages`. What it is
shown of the trace's own (original) response depends on the judge:

- **any scorer but the LLM judge**: the original as the item's `answer` (a scorer that needs a
  reference gets the trace's), and the original is scored like a teacher's answer.
- **the LLM judge, grade mode**: no reference (the rubric's `reference` is ""; write the
  rubric for open-ended answers). Deliberately: the original response of
  open-ended traffic is not a verified answer; grading teachers against it would reward
  imitating the logged model, and would grade the original against itself (a pass every time,
  so never a rejected side). Teachers and the original are graded alike, by the rubric
  alone; a failing original is a rejected side against a passing teacher.
- **the LLM judge, pairwise mode**: the original is the baseline and each teacher's answer the
  candidate, asked in both orders (`Judge.compare`): 1 the teacher won both, 0.5 a tie or
  the orders disagree, 0 it lost. The original is not compared with itself: it passes when
  no teacher beat it, and is a rejected side against one that did. With the default
  `pass_threshold` (1.0) only a win passes: a tie is no evidence that a teacher is better
  than the trace. On these steps only an answer that lost to the original (0) is a rejected
  side beside it (`select.py`, `losses_only`): a tie is no evidence that the winner is better
  than that answer either.

The LLM judge reads an answer's text and its tool calls (an agent's step is often only a
tool call: as text alone it would be empty); other scorers read the text, as before. A
judgement that could not be had (`JudgeError`) is that call's `scorer_error`
(`calls.score_text`): no score, no row, counted in the report's `judged`.

Knowing the mode means loading the judge: `judge_use` does, once, before any teacher is
called, so a bad judge file costs nothing. This is the one place the replay names a scorer
(`LLM_JUDGE`): what the judge is shown depends on its mode, which no registration carries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tuneloop.config.replay import ReplayConfig
from tuneloop.errors import InputError
from tuneloop.records.replay import JudgedSteps, ReplayCall
from tuneloop.replay.judge_file import LLM_JUDGE, judge_file_problems
from tuneloop.replay.plan import Step
from tuneloop.scorers.judge import answer_text, judge_for


@dataclass(frozen=True)
class JudgeUse:
    """The step judge of one replay: its scorer and arguments, and the LLM judge's identity."""

    scorer: str | None
    """`replay.judge`; None: steps without a verifier are not scored."""
    args: dict[str, Any] = field(default_factory=dict)
    """`replay.judge_args`: the item's `scorer_args`."""
    mode: str | None = None
    """The LLM judge's mode (`grade`, `pairwise`); None for any other scorer."""
    model: str | None = None
    """The LLM judge's model id."""
    rubric_sha256: str | None = None
    """sha256 of the LLM judge's rubric."""

    def judges(self, step: Step) -> bool:
        """Whether the step is this judge's: it has no verifier of its own."""
        return self.scorer is not None and step.verifier is None

    def pairwise(self, step: Step) -> bool:
        """Whether the step is judged pairwise, against its original response."""
        return self.mode == "pairwise" and self.judges(step)

    def reads(self, message: Mapping[str, Any]) -> str:
        """What the LLM judge reads of an answer: its text and its tool calls (named with
        their arguments, as the rubric's prompt shows them)."""
        return answer_text(message)


def judge_use(settings: ReplayConfig) -> JudgeUse:
    """The replay's step judge, the LLM judge loaded (and so checked: file, rubric, key);
    InputError naming `replay.judge_args.judge` when it cannot be."""
    if settings.judge != LLM_JUDGE:
        return JudgeUse(settings.judge, dict(settings.judge_args))
    problems = judge_file_problems(settings)
    if problems:
        raise InputError("\n".join(f"{key}: {message}" for key, message in problems))
    judge = judge_for(settings.judge_args["judge"])
    return JudgeUse(
        LLM_JUDGE, dict(settings.judge_args), judge.spec.mode, judge.spec.model, judge.rubric.sha256
    )


def beaten_originals(
    steps: list[Step], calls: Mapping[Any, ReplayCall], use: JudgeUse
) -> dict[str, bool | None]:
    """Step key → whether the original held against every scored teacher answer (no win
    over it), for steps judged pairwise; None when no answer to it was scored."""
    scores: dict[tuple[str, int], list[float]] = {}
    for c in calls.values():
        if c.status == "ok" and c.score is not None:
            scores.setdefault((c.trace, c.step), []).append(c.score)
    out: dict[str, bool | None] = {}
    for step in steps:
        if use.pairwise(step):
            got = scores.get((step.trace, step.index))
            out[step.key] = None if not got else all(s < 1.0 for s in got)
    return out


@dataclass(frozen=True)
class OriginalVerdicts:
    """What scoring the trace's own responses gave."""

    passed: dict[str, bool | None]
    """Step key → whether the original passed (None: not scored)."""
    judged: int = 0
    """Originals of judged steps with a verdict."""
    judge_errors: int = 0
    """Originals of judged steps whose judgement could not be had."""
    judge_cost_usd: float = 0.0
    """What judging the originals cost to make."""


def judge_cost(detail: Mapping[str, Any]) -> float:
    """A score's judge cost (`judge_cost_usd` in its detail), 0 when it names none."""
    cost = detail.get("judge_cost_usd")
    return float(cost) if isinstance(cost, int | float) else 0.0


def judged_steps(
    steps: list[Step],
    calls: list[ReplayCall],
    originals: OriginalVerdicts,
    rows: tuple[list[dict[str, Any]], list[dict[str, Any]]],
    use: JudgeUse,
) -> JudgedSteps | None:
    """The report's `judged`: the judge's steps, scores, errors, cost and rows; None
    without a judge."""
    if use.scorer is None:
        return None
    keys = {s.key for s in steps if use.judges(s)}
    mine = [c for c in calls if f"{c.trace}#{c.step}" in keys]
    scored = [c for c in mine if c.status == "ok"]
    sft, dpo = rows
    return JudgedSteps(
        scorer=use.scorer,
        mode=use.mode,
        model=use.model,
        rubric_sha256=use.rubric_sha256,
        steps=len(keys),
        calls_scored=len(scored),
        originals_scored=originals.judged,
        errors=sum(1 for c in mine if c.status == "scorer_error") + originals.judge_errors,
        cost_usd=sum(judge_cost(c.detail) for c in scored) + originals.judge_cost_usd,
        sft_rows=sum(1 for r in sft if r["source_id"] in keys),
        dpo_pairs=sum(1 for r in dpo if r["source_id"].split("|")[0] in keys),
    )
