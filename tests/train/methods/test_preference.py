"""Replay-DPO's parts: pair tokenization, the draws, and the sigmoid DPO loss."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tuneloop.train.common import load_tokenizer
from tuneloop.train.data import Row
from tuneloop.train.methods.preference import (
    PairDraws,
    TokenizedPair,
    sigmoid_dpo_loss,
    tokenize_pairs,
)


def test_reply_tokens_are_what_the_template_adds_after_the_prompt(tiny_model: Path) -> None:
    tok = load_tokenizer(tiny_model)
    row = Row("p.jsonl:1", {"prompt": "What is 1 + 2?", "chosen": "3", "rejected": "4"})
    (pair,) = tokenize_pairs([row], tok, max_length=512)
    assert tok.decode(pair.prompt).endswith("What is 1 + 2?<|im_end|>\n<|im_start|>assistant\n")
    assert tok.decode(pair.chosen) == "3<|im_end|>\n"
    assert tok.decode(pair.rejected) == "4<|im_end|>\n"
    (short,) = tokenize_pairs([row], tok, max_length=8)
    assert len(short.prompt) == 4 and len(short.prompt) + len(short.chosen) <= 8


def test_draws_cover_every_pair_each_pass_without_touching_torch_rng() -> None:
    import torch

    pairs = [TokenizedPair([i], [i], [i]) for i in range(5)]
    torch.manual_seed(0)
    draws = PairDraws(pairs, per_step=2, seed=3)
    seen = [p.prompt[0] for _ in range(5) for p in draws.draw()]
    assert sorted(seen[:5]) == list(range(5)) and sorted(seen[5:]) == list(range(5))
    after_draws = torch.rand(1).item()
    torch.manual_seed(0)
    assert after_draws == torch.rand(1).item()
    again = PairDraws(pairs, per_step=2, seed=3)
    assert [p.prompt[0] for _ in range(5) for p in again.draw()] == seen


def test_sigmoid_dpo_loss_is_log_2_at_no_margin_and_falls_as_chosen_gains() -> None:
    import torch

    zero = torch.zeros(3)
    assert sigmoid_dpo_loss(zero, zero, zero, zero, beta=0.1).item() == pytest.approx(math.log(2))
    better = sigmoid_dpo_loss(zero + 1, zero, zero, zero, beta=0.1).item()
    assert better == pytest.approx(-math.log(1 / (1 + math.exp(-0.1))))
    # Only the margin against the reference counts: a reference that already prefers chosen
    # by as much leaves the loss at log 2.
    assert sigmoid_dpo_loss(zero + 1, zero, zero + 1, zero, beta=0.1).item() == pytest.approx(
        math.log(2)
    )
