import pytest

from tuneloop.data.ingest.feedback import normalize_feedback
from tuneloop.records.trace import Message, ToolCall


@pytest.mark.parametrize(
    ("raw", "verdict", "score"),
    [
        ("up", "up", 1.0),
        ("👎", "down", 0.0),
        ("Thumbs Down", "down", 0.0),
        (True, "up", 1.0),
        (False, "down", 0.0),
        (-1, "down", 0.0),
        (0.25, None, 0.25),
        (5, None, 1.0),
        ({"thumbs": "up"}, "up", 1.0),
        ({"rating": 1}, None, 0.0),
        ({"rating": 3}, None, 0.5),
        ("0.5", None, 0.5),
    ],
)
def test_normalize_feedback(raw, verdict, score):
    fb = normalize_feedback(raw)
    assert fb is not None and fb.verdict == verdict and fb.score == pytest.approx(score)
    assert fb.raw == raw


@pytest.mark.parametrize("raw", [None, "meh", 42, {"comment": "nice"}, [1]])
def test_no_judgement_is_none(raw):
    assert normalize_feedback(raw) is None


def test_message_to_chat_is_openai_shape():
    m = Message(
        role="assistant",
        content=None,
        tool_calls=[ToolCall(id="c1", name="f", arguments="{}")],
        reasoning="hmm",
    )
    assert m.to_chat() == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }
    assert m.to_chat(with_reasoning=True)["reasoning_content"] == "hmm"
