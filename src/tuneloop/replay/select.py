"""Which responses become training rows: pure selection over the scored calls.

    sft, dpo = select_rows(steps, teachers, calls, originals)

- **Distillation SFT rows**: per step, the best passing teacher response, appended to the
  prefix: `{"messages": [...prefix, response], "source": "replay", "source_id": "<trace>#<i>",
  "teacher", "score"}` — the chat-row shape `tuneloop train --method sft` reads.
- **DPO pairs**: per step with an SFT row, that response (chosen) against each distinct
  failing response (rejected): every teacher's scored-and-failed answer, and the trace's own
  response when it was scored and failed. `{"prompt": prefix, "chosen": [msg], "rejected":
  [msg], "source", "source_id", "chosen_teacher", "rejected_from"}` — TRL's conversational
  preference shape, as `tuneloop train --method dpo` reads. A malformed answer is not a
  message, so it is never a rejected side. On the steps in `losses_only` (judged pairwise
  against the original, `judging.py`) a failing answer is a rejected side only when it lost
  (score 0): a tie with the original says nothing against it.

`TIE_RULE` states how the best passing response is chosen, and is written into the report.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from tuneloop.records.replay import ReplayCall
from tuneloop.replay.plan import Step
from tuneloop.replay.store import CallId
from tuneloop.replay.teachers import TeachersFile

TIE_RULE = (
    "highest score; among equal scores the cheaper call (cost_usd, a call without usage "
    "counting as 0); then the teacher listed first in the teachers file"
)


def _passing(calls: list[ReplayCall]) -> list[ReplayCall]:
    return [c for c in calls if c.status == "ok" and c.passed and c.response is not None]


def best_response(calls: list[ReplayCall], order: dict[str, int]) -> ReplayCall | None:
    """The SFT choice among one step's calls, by `TIE_RULE`; None when none passed."""
    passing = _passing(calls)
    if not passing:
        return None
    return min(passing, key=lambda c: (-(c.score or 0.0), c.cost_usd or 0.0, order[c.teacher]))


def select_rows(
    steps: list[Step],
    teachers: TeachersFile,
    calls: dict[CallId, ReplayCall],
    originals: dict[str, bool | None],
    losses_only: Collection[str] = (),
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(SFT rows, DPO pairs) in step order; `losses_only`: step keys whose rejected teacher
    answers must have scored 0 (see the module docstring)."""
    order = {t.name: i for i, t in enumerate(teachers.teachers)}
    by_step: dict[tuple[str, int], list[ReplayCall]] = {}
    for row in calls.values():
        by_step.setdefault((row.trace, row.step), []).append(row)
    sft, dpo = [], []
    for step in steps:
        step_calls = sorted(
            by_step.get((step.trace, step.index), []), key=lambda c: order[c.teacher]
        )
        best = best_response(step_calls, order)
        if best is None or best.response is None:
            continue
        sft.append(
            {
                "messages": [*step.prefix, best.response],
                "source": "replay",
                "source_id": step.key,
                "teacher": best.teacher,
                "score": best.score,
            }
        )
        strict = step.key in losses_only
        rejected = [
            (c.teacher, c.response)
            for c in step_calls
            if c.status == "ok" and c.passed is False and c.response is not None
            if not strict or c.score == 0.0
        ]
        if originals.get(step.key) is False:
            rejected.append(("original", step.original))
        seen: list[dict[str, Any]] = [best.response]
        for origin, message in rejected:
            if message in seen:
                continue
            seen.append(message)
            dpo.append(
                {
                    "prompt": step.prefix,
                    "chosen": [best.response],
                    "rejected": [message],
                    "source": "replay",
                    "source_id": f"{step.key}|{origin}",
                    "chosen_teacher": best.teacher,
                    "rejected_from": origin,
                }
            )
    return sft, dpo
