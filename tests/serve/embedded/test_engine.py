"""The continuous-batching engine over the tiny random-weight model (which never ends a turn
by itself under greedy decoding, so a row runs exactly to its `max_tokens`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tuneloop.serve.embedded.engine import Engine
from tuneloop.serve.embedded.row import Row, RowResult

QUESTIONS = ["What is 2 + 2?", "Hi", "A longer question about numbers?", "7*8", "Count to 9"]


@pytest.fixture
def engine(tiny_model: Path) -> Iterator[Engine]:
    """A fresh engine with no stop tokens, so rows end only at their length limit."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model).eval()
    eng = Engine(model, AutoTokenizer.from_pretrained(tiny_model), frozenset(), max_batch_size=4)
    yield eng.start()
    eng.close()


def _until(condition: Callable[[], bool]) -> None:
    """Poll a condition the engine's worker will make true (a generous cap, not a measure)."""
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, "the engine never got there"
        time.sleep(0.002)


def _prompt(engine: Engine, question: str) -> tuple[int, ...]:
    return tuple(engine.chat_prompt([{"role": "user", "content": question}]))


def test_greedy_outputs_match_hf_generate_one_prompt_at_a_time(engine: Engine) -> None:
    """Rows arriving while others run (and leaving at different lengths) decode exactly what
    `model.generate` decodes for each prompt alone — the static engine's greedy answers."""
    import torch

    prompts = [_prompt(engine, q) for q in QUESTIONS * 2]
    lengths = [6 + 5 * (i % 4) for i in range(len(prompts))]
    futures = []
    for i, (prompt, n) in enumerate(zip(prompts, lengths, strict=True)):
        futures.append(engine.submit([Row(prompt, 0.0, 1.0, n, 0)]))
        if i % 3 == 0:  # let it start, so later rows join a running batch (it may be done)
            _until(lambda: engine.running > 0 or futures[-1].done())
    served = [f.result()[0] for f in futures]
    assert engine.batches_run > 1  # rows were admitted into a running batch
    for prompt, n, result in zip(prompts, lengths, served, strict=True):
        with torch.inference_mode():
            out = engine.model.generate(
                torch.tensor([prompt]), do_sample=False, max_new_tokens=n, min_new_tokens=n
            )
        expected = engine.decode(out[0, len(prompt) :].tolist())
        assert result == RowResult(expected, "length", n)


def test_a_short_request_does_not_wait_for_a_long_one(engine: Engine) -> None:
    long = engine.submit([Row(_prompt(engine, "Tell me everything"), 0.0, 1.0, 900, 0)])
    _until(lambda: engine.running == 1)
    short = engine.submit([Row(_prompt(engine, "Hi"), 0.0, 1.0, 3, 0)])
    assert short.result()[0].completion_tokens == 3
    assert not long.done()  # the short row joined the running batch and left it first
    long.cancel()


def test_a_cancelled_request_frees_its_slot(engine: Engine) -> None:
    engine.max_batch_size = 1
    long = engine.submit([Row(_prompt(engine, "Tell me everything"), 0.0, 1.0, 900, 0)])
    _until(lambda: engine.running == 1)
    queued = engine.submit([Row(_prompt(engine, "Hi"), 0.0, 1.0, 3, 0)] * 2)
    gone = engine.submit([Row(_prompt(engine, "Never mind"), 0.0, 1.0, 3, 0)])
    gone.cancel()  # still queued: dropped when its turn comes
    long.cancel()  # running: dropped at the next step, and its slot goes to `queued`
    assert [r.completion_tokens for r in queued.result()] == [3, 3]
    _until(lambda: engine.running == 0 and engine.waiting == 0)
    assert engine.rows_cancelled == 2


def test_listeners_see_every_token_and_each_row_finish(engine: Engine) -> None:
    events: list[tuple[str, int, Any]] = []

    class Listener:
        def token(self, index: int, token: int) -> None:
            events.append(("token", index, token))

        def done(self, index: int, result: RowResult) -> None:
            events.append(("done", index, result))

    rows = [Row(_prompt(engine, "Hi"), 0.0, 1.0, n, 0) for n in (2, 4)]
    results = engine.submit(rows, Listener()).result()
    assert [e[1] for e in events if e[0] == "token"].count(1) == 3  # the last token is `done`
    assert [(e[1], e[2]) for e in events if e[0] == "done"] == list(enumerate(results))


def test_max_model_len_replaces_the_models_context(tiny_model: Path) -> None:
    """`serve.max_model_len` widens (or narrows) what a request may use; the default is the
    model's `max_position_embeddings`."""
    from tuneloop.serve.embedded.engine import load_engine

    assert load_engine(tiny_model, max_batch_size=1, batch_wait_ms=0).context == 1024
    wide = load_engine(tiny_model, max_batch_size=1, batch_wait_ms=0, max_model_len=1500)
    assert wide.context == 1500
