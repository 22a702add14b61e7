"""Selection of SFT rows and DPO pairs: the tie rule, the original response as rejected."""

from __future__ import annotations

from tuneloop.records.replay import ReplayCall
from tuneloop.replay.plan import Step
from tuneloop.replay.select import best_response, select_rows
from tuneloop.replay.teachers import TeachersFile

STEP = Step(
    "s/x",
    1,
    [{"role": "user", "content": "q"}],
    {"role": "assistant", "content": "orig"},
    {"answer": "a", "scorer": "exact"},
    None,
)
TEACHERS = TeachersFile.model_validate(
    {"teachers": [{"name": n, "endpoint": "http://x/v1", "model": n} for n in "abcd"]}
)
ORDER = {"a": 0, "b": 1, "c": 2, "d": 3}


def call(
    teacher: str,
    text: str | None,
    score: float | None,
    cost: float | None = None,
    status: str = "ok",
) -> ReplayCall:
    return ReplayCall(
        trace="s/x",
        step=1,
        teacher=teacher,
        model=teacher,
        request_hash="h",
        status=status,  # type: ignore[arg-type]
        response=None if text is None else {"role": "assistant", "content": text},
        score=score,
        passed=None if score is None else score >= 1.0,
        cost_usd=cost,
    )


def test_tie_rule_score_then_cost_then_file_order() -> None:
    assert best_response([call("a", "x", 1.0, 0.2), call("b", "y", 1.0, 0.1)], ORDER).teacher == "b"
    assert best_response([call("b", "y", 1.0, 0.1), call("a", "x", 1.0, 0.1)], ORDER).teacher == "a"
    assert best_response([call("a", "x", 0.5), call("b", "y", 0.9)], ORDER) is None  # none passed
    assert best_response([call("a", None, 0.0, status="malformed")], ORDER) is None


def _select(calls, original_passed):
    by_id = {(c.trace, c.step, c.teacher, c.request_hash): c for c in calls}
    return select_rows([STEP], TEACHERS, by_id, {STEP.key: original_passed})


def test_pairs_reject_each_distinct_failure_and_a_failed_original() -> None:
    calls = [
        call("a", "good", 1.0),
        call("b", "bad", 0.0),
        call("c", "bad", 0.0),  # same text as b: one pair
        call("d", None, 0.0, status="malformed"),  # no message: never rejected
    ]
    sft, dpo = _select(calls, original_passed=False)
    assert sft == [
        {
            "messages": [STEP.prefix[0], {"role": "assistant", "content": "good"}],
            "source": "replay",
            "source_id": "s/x#1",
            "teacher": "a",
            "score": 1.0,
        }
    ]
    assert [(p["rejected_from"], p["rejected"][0]["content"]) for p in dpo] == [
        ("b", "bad"),
        ("original", "orig"),
    ]
    assert all(p["prompt"] == STEP.prefix and p["chosen_teacher"] == "a" for p in dpo)
    _, dpo_passed_original = _select(calls, original_passed=True)
    assert [p["rejected_from"] for p in dpo_passed_original] == ["b"]


def test_missing_calls_give_no_rows() -> None:
    sft, dpo = _select([call("a", None, None, status="missing")], original_passed=False)
    assert sft == [] and dpo == []


def test_against_the_original_only_a_loss_is_a_rejected_side() -> None:
    """A step judged pairwise (`losses_only`): a tie with the original (0.5) fails the default
    threshold but is no evidence against it; a loss (0) is."""
    calls = [call("a", "won", 1.0), call("b", "tied", 0.5), call("c", "lost", 0.0)]
    by_id = {(c.trace, c.step, c.teacher, c.request_hash): c for c in calls}
    _, dpo = select_rows([STEP], TEACHERS, by_id, {STEP.key: False}, losses_only={STEP.key})
    assert [p["rejected_from"] for p in dpo] == ["c", "original"]
    _, every = select_rows([STEP], TEACHERS, by_id, {STEP.key: False})
    assert [p["rejected_from"] for p in every] == ["b", "c", "original"]
