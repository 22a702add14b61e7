"""Log-probabilities from the generating forward pass (`logprobs.py`), checked against a plain
transformers forward over the same ids on the tiny model, alone and in a left-padded batch;
and the two OpenAI shapes the routes send (chat `content`, completions' legacy lists with
`echo`, which lm-eval's loglikelihood tasks read)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import torch

from tuneloop.serve.embedded.engine import Engine
from tuneloop.serve.embedded.routes import ServerSettings, create_app
from tuneloop.serve.embedded.row import Row, RowResult

NAME = "tiny"
TOL = 1e-4


def reference(engine: Engine, ids: list[int]) -> torch.Tensor:
    """log-softmax of the model's logits at every position of `ids` (one unpadded forward)."""
    with torch.inference_mode():
        logits = engine.model(input_ids=torch.tensor([ids])).logits[0]
    return torch.log_softmax(logits.float(), dim=-1)


def run(engine: Engine, rows: list[Row]) -> list[RowResult]:
    return engine.submit(rows).result(timeout=120)


def row(engine: Engine, text: str, **settings: Any) -> Row:
    values = {"temperature": 0.0, "top_p": 1.0, "max_tokens": 6, "seed": 1, **settings}
    return Row(prompt_ids=tuple(engine.text_prompt(text)), **values)


def check(engine: Engine, r: Row, result: RowResult, top: int) -> None:
    """Every returned position equals the reference to TOL, alternatives included."""
    assert result.logprobs is not None and result.prompt_logprobs is not None
    generated = [e.token for e in result.logprobs]
    ids = list(r.prompt_ids) + generated
    ref = reference(engine, ids)
    entries = [*result.prompt_logprobs, *result.logprobs]
    assert len(entries) == len(ids) - 1
    for position, entry in enumerate(entries, start=1):
        expected = ref[position - 1]
        assert entry.token == ids[position]
        assert abs(entry.logprob - float(expected[entry.token])) < TOL
        values, best = expected.topk(top)
        assert [t for t, _ in entry.top] == best.tolist()
        assert max(abs(lp - v) for (_, lp), v in zip(entry.top, values.tolist(), strict=True)) < TOL


def test_logprobs_equal_a_plain_forward_alone_and_in_a_padded_batch(
    tiny_engine: Engine,
) -> None:
    alone = row(tiny_engine, "12+3=", logprobs=3, prompt_logprobs=3)
    [result] = run(tiny_engine, [alone])
    check(tiny_engine, alone, result, 3)
    # greedy: each generated token is the top one
    assert all(e.top[0][0] == e.token for e in result.logprobs or ())
    # left-padded beside longer and shorter prompts, some sampled, one without logprobs
    rows = [
        row(tiny_engine, "7*8=", logprobs=2, prompt_logprobs=2),
        row(tiny_engine, "1234567+89=", logprobs=2, prompt_logprobs=2, temperature=0.9),
        row(tiny_engine, "5-2=", max_tokens=3),
    ]
    results = run(tiny_engine, rows)
    for r, result in zip(rows[:2], results[:2], strict=True):
        check(tiny_engine, r, result, 2)
    assert results[2].logprobs is None and results[2].prompt_logprobs is None


def client(engine: Engine) -> httpx.AsyncClient:
    app = create_app(engine, NAME, ServerSettings())
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


async def test_an_echoed_completion_scores_its_prompt_as_lm_eval_reads_it(
    tiny_engine: Engine,
) -> None:
    """lm-eval's `local-completions` loglikelihood request: token ids, echo, logprobs 1,
    max_tokens 1; it reads `token_logprobs[ctxlen:-1]` and compares each top token."""
    context, continuation = tiny_engine.text_prompt("12+3="), tiny_engine.text_prompt("15")
    ids = context + continuation
    body = {"model": NAME, "prompt": ids, "echo": True, "logprobs": 1, "max_tokens": 1}
    async with client(tiny_engine) as c:
        answer = (await c.post("/v1/completions", json={**body, "temperature": 0})).json()
    choice = answer["choices"][0]
    lp = choice["logprobs"]
    assert len(lp["tokens"]) == len(ids) + 1 and lp["token_logprobs"][0] is None
    assert lp["top_logprobs"][0] is None and lp["text_offset"][0] == 0
    assert choice["text"].startswith(tiny_engine.decode(ids))
    ref = reference(tiny_engine, ids)
    scored = lp["token_logprobs"][len(context) : -1]
    expected = [float(ref[p - 1, ids[p]]) for p in range(len(context), len(ids))]
    assert sum(scored) == pytest.approx(sum(expected), abs=TOL * len(ids))
    assert all(len(top) == 1 for top in lp["top_logprobs"][1:])
    offsets = lp["text_offset"]
    assert offsets == sorted(offsets) and offsets[-1] <= len(choice["text"])


async def test_chat_logprobs_stream_as_they_are_sent_whole(tiny_engine: Engine) -> None:
    chat = {
        "model": NAME,
        "messages": [{"role": "user", "content": "What is 3 + 4?"}],
        "max_tokens": 5,
        "temperature": 0,
        "logprobs": True,
        "top_logprobs": 2,
    }
    async with client(tiny_engine) as c:
        whole = (await c.post("/v1/chat/completions", json=chat)).json()
        streamed = await c.post("/v1/chat/completions", json={**chat, "stream": True})
    content = whole["choices"][0]["logprobs"]["content"]
    assert len(content) == whole["usage"]["completion_tokens"]  # end-of-turn included
    assert all(len(c["top_logprobs"]) == 2 for c in content)
    assert all(c["bytes"] == list(c["token"].encode()) for c in content)
    events = [
        json.loads(line[6:]) for line in streamed.text.splitlines() if line.startswith("data: {")
    ]
    sent = [e["choices"][0]["logprobs"] for e in events if e["choices"][0]["logprobs"]]
    assert [lp["content"] for lp in sent] == [content]


@pytest.mark.parametrize(
    ("path", "extra", "param"),
    [
        ("/v1/chat/completions", {"top_logprobs": 2}, "top_logprobs"),
        ("/v1/chat/completions", {"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
        ("/v1/completions", {"logprobs": 21}, "logprobs"),
        ("/v1/completions", {"echo": True, "stream": True}, "echo"),
    ],
)
async def test_logprob_requests_out_of_range_name_their_param(
    tiny_engine: Engine, path: str, extra: dict[str, Any], param: str
) -> None:
    base: dict[str, Any] = {"model": NAME}
    base |= {"prompt": "1"} if path == "/v1/completions" else {}
    base |= {"messages": [{"role": "user", "content": "x"}]} if "chat" in path else {}
    async with client(tiny_engine) as c:
        answer = await c.post(path, json={**base, **extra})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == param
