from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tuneloop.serve.embedded.decode import DecodeBatch, generate_batch, sample_next
from tuneloop.serve.embedded.row import Row, RowResult, derive_seed

VOCAB = 10
EOS = 9


class FakeCache:
    def __init__(self) -> None:
        self.selected: list[list[int]] = []

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self.selected.append(indices.tolist())


@dataclass
class FakeOut:
    logits: torch.Tensor
    past_key_values: FakeCache


class CountingModel:
    """Next token = last token + 1 (mod VOCAB), deterministically: token EOS ends a row."""

    def __init__(self) -> None:
        self.cache = FakeCache()
        self.calls = 0

    def forward(self, input_ids: Any = None, past_key_values: Any = None, **_: Any) -> Any:
        self.calls += 1
        last = input_ids[:, -1]
        logits = torch.full((len(last), 1, VOCAB), -30.0)
        logits[torch.arange(len(last)), 0, (last + 1) % VOCAB] = 30.0
        return FakeOut(logits, self.cache)

    __call__ = forward


def decode(ids: list[int]) -> str:
    return "".join(chr(ord("a") + i) for i in ids)


def run(rows: list[Row]) -> tuple[dict[int, RowResult], CountingModel]:
    model, results = CountingModel(), {}
    generate_batch(
        model,
        rows,
        eos_ids=frozenset({EOS}),
        pad_id=0,
        decode=decode,
        on_done=results.__setitem__,
    )
    return results, model


def test_rows_finish_by_eos_stop_string_or_length_and_leave_the_batch() -> None:
    rows = [
        Row((6,), 0.0, 1.0, 10, 0),  # 7 8 9=eos → "hi", stop after 3 tokens
        Row((1, 2), 0.0, 1.0, 2, 0),  # 3 4 → length
        Row((0,), 0.0, 1.0, 10, 0, ("d",)),  # 1 2 3 → "bcd" cut before "d"
    ]
    results, model = run(rows)
    assert results[0] == RowResult("hi", "stop", 3)
    assert results[1] == RowResult("de", "length", 2)
    assert results[2] == RowResult("bc", "stop", 3)
    assert model.calls == 3
    assert model.cache.selected == [[0, 2]]  # row 1 dropped after step 2


def test_sample_next_greedy_rows_take_argmax() -> None:
    logits = torch.tensor([[0.0, 5.0, 1.0], [3.0, 0.0, 1.0]])
    out = sample_next(logits, torch.tensor([0.0, 0.0]), torch.tensor([1.0, 1.0]), torch.rand(2))
    assert out.tolist() == [1, 0]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-5, 5), min_size=2, max_size=8),
    st.floats(0.05, 1.0),
    st.floats(0.0, 0.999),
)
def test_nucleus_sampling_only_picks_from_the_nucleus(
    logits: list[float], top_p: float, u: float
) -> None:
    row = torch.tensor([logits])
    tok = int(sample_next(row, torch.tensor([1.0]), torch.tensor([top_p]), torch.tensor([u])))
    probs = torch.softmax(row[0], -1)
    mass_before = probs[probs > probs[tok]].sum().item()
    assert mass_before < top_p + 1e-6


def test_inverse_cdf_follows_the_distribution() -> None:
    logits = torch.log(torch.tensor([[0.2, 0.5, 0.3]])).repeat(3000, 1)
    u = torch.rand(3000, generator=torch.Generator().manual_seed(0))
    picks = sample_next(logits, torch.ones(3000), torch.ones(3000), u)
    freq = torch.bincount(picks, minlength=3).float() / 3000
    assert torch.allclose(freq, torch.tensor([0.2, 0.5, 0.3]), atol=0.04)


def test_derived_seeds_are_stable_and_distinct() -> None:
    assert derive_seed(1, 0) == derive_seed(1, 0)
    assert len({derive_seed(s, i) for s in range(5) for i in range(5)}) == 25
    assert 0 <= derive_seed(2**70, 3) < 2**63


def test_a_seeded_row_samples_the_same_alone_and_in_a_batch(tiny_engine: Any) -> None:
    engine = tiny_engine  # its worker thread idles: this test decodes directly
    prompt = tuple(engine.chat_prompt([{"role": "user", "content": "What is 2 + 2?"}]))
    other = tuple(engine.chat_prompt([{"role": "user", "content": "Hello there, model"}]))
    row = Row(prompt, 1.0, 0.9, 24, derive_seed(5, 0))

    def sample(rows: list[Row]) -> RowResult:
        out: dict[int, RowResult] = {}
        generate_batch(
            engine.model,
            rows,
            eos_ids=engine.eos_ids,
            pad_id=engine.pad_id,
            decode=engine.decode,
            on_done=out.__setitem__,
        )
        return out[len(rows) - 1]

    alone = sample([row])
    crowd = [Row(other, 0.7, 1.0, 5 + i, derive_seed(9, i)) for i in range(5)]
    assert sample([*crowd, row]) == alone
    assert sample([row]) == alone
    assert sample([Row(prompt, 1.0, 0.9, 24, derive_seed(5, 1))]) != alone


def test_rows_that_join_a_running_batch_decode_what_they_decode_alone(tiny_engine: Any) -> None:
    """Continuous batching: newcomers are prefilled apart and merged into the running KV cache
    (padded on the left, trimmed when rows leave); greedy and seeded rows are unaffected."""
    engine = tiny_engine
    questions = ["What is 2 + 2?", "Hi", "A much longer question about numbers, please?", "7*8"]
    prompts = [tuple(engine.chat_prompt([{"role": "user", "content": q}])) for q in questions]
    rows = [
        Row(prompts[0], 0.0, 1.0, 30, 0),
        Row(prompts[1], 1.0, 0.9, 12, derive_seed(3, 0)),
        Row(prompts[2], 0.0, 1.0, 20, 0),
        Row(prompts[3], 0.8, 1.0, 25, derive_seed(3, 1)),
    ]
    alone: dict[int, RowResult] = {}
    for i, row in enumerate(rows):
        out: dict[int, RowResult] = {}
        generate_batch(
            engine.model,
            [row],
            eos_ids=frozenset(),
            pad_id=engine.pad_id,
            decode=engine.decode,
            on_done=out.__setitem__,
        )
        alone[i] = out[0]
    joined: dict[Any, RowResult] = {}
    batch = DecodeBatch(
        engine.model,
        eos_ids=frozenset(),
        pad_id=engine.pad_id,
        decode=engine.decode,
        on_done=joined.__setitem__,
    )
    batch.add([(0, rows[0])])
    for _ in range(5):
        batch.step()
    batch.add([(1, rows[1]), (2, rows[2])])  # a longer prompt than the running cache
    for _ in range(14):
        batch.step()
    assert 1 in joined and len(batch) == 2  # row 1 left; row 2 leaving later trims the cache
    batch.add([(3, rows[3])])
    while len(batch):
        batch.step()
    assert joined == alone
