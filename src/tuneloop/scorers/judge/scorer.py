"""`judge`: an LLM judge as a scorer, for answers that have no verifiable reference.

    eval:
      judge: judges/support.yaml     # the judge file (scorers/judge/spec.py)
    # suite items: {"id": …, "messages": […], "scorer": "judge"}

The eval builds the scorer from `eval.judge` (a train or replay caller passes `judge=` the
same way); it runs in a worker thread (not `inline`: it waits on HTTP). Grade mode scores the
completion with the rubric (the item's `answer`, if any, is the rubric's `reference`);
pairwise mode compares the completion (the candidate) with the item's `answer` (the baseline:
a champion's answer, or a trace's original response in replay) in both orders and scores
1 / 0.5 / 0. A judgement that could not be had raises (`JudgeError`): the eval records a
harness error, never a score. The detail names the judge, the rubric's sha256, the judgement,
its cost and whether it came from the cache.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tuneloop.plugins import Score, ScoreFn
from tuneloop.samplelog import SampleRow
from tuneloop.scorers.base import scorer
from tuneloop.scorers.judge.judge import Judge, load_judge

_LOADED: dict[str, Judge] = {}


def judge_for(path: str | Path) -> Judge:
    """The judge of a judge file, loaded once per process (one HTTP client and cache)."""
    key = str(Path(path).resolve())
    if key not in _LOADED:
        _LOADED[key] = load_judge(Path(path))
    return _LOADED[key]


def judge_configured(path: Path | None) -> dict[str, dict[str, Any]]:
    """A resolver's `configured` arguments for loop.yaml's judge file (`eval.judge`), the judge
    loaded — and so checked: file, rubric, key — before the caller's first request."""
    if path is None:
        return {}
    judge_for(path)
    return {"judge": {"judge": str(path)}}


def judge_cost(rows: Iterable[SampleRow]) -> float | None:
    """What the judge's grades in `rows` cost (their details' `judge_cost_usd`); None when
    no graded row reports a cost."""
    costs = [
        r.detail["judge_cost_usd"]
        for r in rows
        if isinstance(r.detail, dict) and isinstance(r.detail.get("judge_cost_usd"), float | int)
    ]
    return sum(costs) if costs else None


def judge_unanswered(rows: Iterable[SampleRow], path: Path | None) -> str | None:
    """Why an eval's judge is misconfigured, when it gave no parsable judgement for any
    sample it graded (it answers prose: its rubric or model is wrong, not the model under
    eval); None otherwise."""
    judged = [r for r in rows if r.scorer == "judge" and r.status != "missing"]
    if not judged or any(r.status == "ok" for r in judged):
        return None
    errors = [r.error or "" for r in judged]
    if not all("JudgeUnparsable" in e for e in errors):
        return None
    rubric = f" ({judge_for(path).spec.rubric})" if path is not None else ""
    return (
        f"the judge gave no parsable judgement for any of the {len(judged)} samples scored "
        f"`judge` (last: {errors[-1][:160]}); its rubric{rubric} must ask for "
        "`SCORE: <0..1>` on the last line. Rows are kept as harness errors: rerun into a "
        "new --out once the judge is fixed"
    )


def item_messages(item: dict[str, Any]) -> list[dict[str, Any]]:
    """The item's conversation: its `messages`, or its `prompt` as one user message."""
    messages = item.get("messages")
    if isinstance(messages, list):
        return messages
    return [{"role": "user", "content": str(item.get("prompt", ""))}]


@scorer("judge")
def judge_scorer(judge: str | Path | None = None) -> ScoreFn:
    """Score with the judge of the judge file `judge` (given by `eval.judge`, or an item's
    `scorer_args.judge`)."""

    def score(item: dict[str, Any], completion: str) -> Score:
        path = (item.get("scorer_args") or {}).get("judge") or judge
        if path is None:
            raise ValueError("scorer 'judge' needs a judge file: set eval.judge in loop.yaml")
        loaded = judge_for(path)
        reference = item.get("answer")
        if loaded.spec.mode == "pairwise":
            if reference is None:
                raise ValueError("a pairwise judge needs the item's `answer` (the baseline)")
            pref = loaded.compare(item_messages(item), str(reference), completion)
            value, raw, cost, cached = pref.value, "/".join(pref.orders), pref.cost_usd, pref.cached
        else:
            got = loaded.grade(
                item_messages(item), completion, None if reference is None else str(reference)
            )
            value, raw, cost, cached = got.value, got.raw[-300:], got.cost_usd, got.cached
        return Score(
            value,
            {
                "judge": loaded.spec.model,
                "rubric_sha256": loaded.rubric.sha256,
                "judgement": raw,
                "judge_cost_usd": cost,
                "judge_cached": cached,
            },
        )

    return score
