"""Corpus rows from traces: a user's correction becomes the taught answer and a preference pair."""

from __future__ import annotations

from tuneloop.data.corpus.training_rows import preference_pairs, to_row
from tuneloop.records.trace import Feedback, Message, Trace


def _trace(answer: str, feedback: Feedback | None) -> Trace:
    return Trace(
        source="traffic",
        source_id="chatcmpl-1#0",
        source_file="traffic.jsonl",
        source_lines=[1],
        messages=[
            Message(role="user", content="Add 17 and 25."),
            Message(role="assistant", content=answer),
        ],
        feedback=feedback,
    )


def test_a_correction_is_the_answer_taught_and_the_rejected_side() -> None:
    row = to_row(_trace("41", Feedback(verdict="down", score=0.0, correction="42")))
    assert row is not None
    assert row.messages[-1] == {"role": "assistant", "content": "42"} and row.score == 1.0
    assert row.replaced == {"role": "assistant", "content": "41"}
    [pair] = preference_pairs([row])
    assert pair["chosen"][0]["content"] == "42" and pair["rejected"][0]["content"] == "41"
    assert pair["prompt"] == [{"role": "user", "content": "Add 17 and 25."}]


def test_without_a_correction_the_model_answer_and_its_score_stay() -> None:
    row = to_row(_trace("41", Feedback(verdict="down", score=0.0)))
    assert row is not None and row.messages[-1]["content"] == "41" and row.score == 0.0
    assert row.replaced is None and preference_pairs([row]) == []
