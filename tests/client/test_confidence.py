"""An answer's confidence from its logprobs: the parser (both OpenAI shapes, untrusted input)
and the two signals, on constructed responses."""

from __future__ import annotations

import json
import math

import pytest

from tuneloop.client.completions import MalformedResponse, parse_response
from tuneloop.client.confidence import answer_confidence
from tuneloop.evaluate.plan import build_payload
from tuneloop.samplelog import SampleRow, SamplingParams
from tuneloop.suite.reader import SuiteItem


def chat_body(logprobs: object) -> bytes:
    choice = {"message": {"content": "42"}, "finish_reason": "stop", "logprobs": logprobs}
    return json.dumps({"choices": [choice]}).encode()


def entry(lp: float, *top: float) -> dict[str, object]:
    alternatives = [{"token": "y", "logprob": t} for t in top]
    return {"token": "x", "logprob": lp, "top_logprobs": alternatives}


def test_chat_logprobs_give_the_mean_and_the_smallest_top_two_margin() -> None:
    body = chat_body({"content": [entry(-0.1, -0.1, -2.5), entry(-0.7, -0.7, -0.9)]})
    c = answer_confidence(parse_response(body, 0.01, chat=True))
    assert c.mean_logprob == pytest.approx(-0.4) and c.tokens == 2
    assert c.min_margin == pytest.approx(0.2)  # the second token: -0.7 against -0.9


def test_completion_logprobs_in_the_legacy_shape() -> None:
    choice = {
        "text": "42",
        "logprobs": {
            "tokens": ["4", "2"],
            "token_logprobs": [-0.5, -0.25],
            "top_logprobs": [{"4": -0.5, "5": -1.5}, {"2": -0.25}],
        },
    }
    done = parse_response(json.dumps({"choices": [choice]}).encode(), 0.0, chat=False)
    c = answer_confidence(done)
    assert (c.mean_logprob, c.min_margin, c.tokens) == (-0.375, 1.0, 2)


def test_no_logprobs_when_asked_is_a_harness_error_not_a_score() -> None:
    done = parse_response(chat_body(None), 0.0, chat=True)
    with pytest.raises(MalformedResponse, match="no token logprobs.*eval.logprobs"):
        answer_confidence(done)


@pytest.mark.parametrize(
    "bad",
    [
        {"content": [{"token": "x"}]},
        {"content": "x"},
        {"content": [entry(0.5)]},
        {"content": [entry(math.nan)]},
    ],
)
def test_malformed_logprobs_are_refused(bad: object) -> None:
    body = chat_body(bad)
    with pytest.raises(MalformedResponse, match="logprobs are malformed"):
        parse_response(body, 0.0, chat=True)


def test_the_request_asks_for_two_alternatives_only_when_configured() -> None:
    item = SuiteItem("a", [{"role": "user", "content": "1+1?"}], None, "numeric", (), {})
    plain = SamplingParams(n_samples=1, temperature=0.0, max_tokens=4)
    asked = plain.model_copy(update={"logprobs": True})
    assert "logprobs" not in build_payload(item, "m", plain, 0)[0]
    body, chat = build_payload(item, "m", asked, 0)
    assert chat and (body["logprobs"], body["top_logprobs"]) == (True, 2)
    text = SuiteItem("b", None, "1+1=", "numeric", (), {})
    assert build_payload(text, "m", asked, 0)[0]["logprobs"] == 2


def test_a_row_with_a_confidence_is_version_3_and_one_without_is_unchanged() -> None:
    base = SampleRow(suite_revision="r", item_id="a", sample_index=0, model="m", seed=0)
    assert base.to_json()["schema"] == "tuneloop.sample/1" and "confidence" not in base.to_json()
    done = parse_response(chat_body({"content": [entry(-0.1, -0.1, -2.0)]}), 0.0, chat=True)
    row = base.model_copy(update={"confidence": answer_confidence(done)})
    data = row.to_json()
    assert data["schema"] == "tuneloop.sample/3"
    assert data["confidence"] == {"mean_logprob": -0.1, "min_margin": 1.9, "tokens": 1}
