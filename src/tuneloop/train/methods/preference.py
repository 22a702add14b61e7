"""Replay-DPO: preference pairs drawn a few per step, sigmoid DPO against the base model.

The composite trainer's third channel. Pairs are the rows `tuneloop train --method dpo` reads
(`prompt`, `chosen`, `rejected`: a corpus build's `preference.jsonl`, or teacher pairs). They are
tokenized once, like TRL's DPO does it (the prompt rendered with the chat template and the
generation prompt, each reply as the rest of the rendered conversation), and drawn in a
shuffled order that is reshuffled after each pass, from a generator of its own: drawing never
touches torch's RNG, so the other channels sample exactly as they would without it.

The reference is the same model with the LoRA adapter disabled (peft's `disable_adapter()`), so
no second copy is loaded — as TRL's DPOTrainer does with a PEFT model. The loss is the sigmoid
DPO loss of Rafailov et al. 2023, written out (TRL's lives inside `DPOTrainer._compute_loss`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from tuneloop.errors import InputError
from tuneloop.train.data import Row, dpo_rows


@dataclass(frozen=True)
class TokenizedPair:
    """One preference pair as token ids."""

    prompt: list[int]
    chosen: list[int]
    rejected: list[int]


def split_ids(
    tokenizer: Any, prompt: list[dict], reply: list[dict], where: str
) -> tuple[list[int], list[int]]:
    """(prompt ids with the generation prompt, the ids the template adds for `reply`)."""
    head = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
    full = tokenizer.apply_chat_template([*prompt, *reply], tokenize=False)
    if not full.startswith(head):
        raise InputError(
            f"{where}: the chat template renders the prompt differently when a reply follows "
            "it, so the reply's tokens cannot be separated"
        )
    head_ids: list[int] = tokenizer(head, add_special_tokens=False)["input_ids"]
    reply_ids: list[int] = tokenizer(full[len(head) :], add_special_tokens=False)["input_ids"]
    return list(head_ids), list(reply_ids)


def tokenize_pairs(rows: list[Row], tokenizer: Any, max_length: int) -> list[TokenizedPair]:
    """Preference rows as token ids; prompts keep their last max_length/2 tokens, replies are
    cut to the room left."""
    out = []
    for row, where in zip(dpo_rows(rows), [r.where for r in rows], strict=True):
        prompt, chosen = split_ids(tokenizer, row["prompt"], row["chosen"], where)
        _, rejected = split_ids(tokenizer, row["prompt"], row["rejected"], where)
        prompt = prompt[-(max_length // 2) :]
        room = max_length - len(prompt)
        out.append(TokenizedPair(prompt, chosen[:room], rejected[:room]))
    return out


class PairDraws:
    """Endless mini-batches of pairs: a seeded shuffle, reshuffled after every pass."""

    def __init__(self, pairs: list[TokenizedPair], per_step: int, seed: int) -> None:
        if not pairs:
            raise InputError("replay-DPO has no preference pairs (train.composite.pairs is empty)")
        self.pairs, self.per_step = pairs, per_step
        self._rng = random.Random(seed)
        self._order: list[int] = []

    def draw(self) -> list[TokenizedPair]:
        batch = []
        for _ in range(self.per_step):
            if not self._order:
                self._order = list(range(len(self.pairs)))
                self._rng.shuffle(self._order)
            batch.append(self.pairs[self._order.pop()])
        return batch


def reply_logps(model: Any, prompts: list[list[int]], replies: list[list[int]], pad: int) -> Any:
    """Summed log-probability of each reply given its prompt: (B,). Right-padded batch."""
    import torch

    device = next(model.parameters()).device
    width = max(len(p) + len(r) for p, r in zip(prompts, replies, strict=True))
    ids = torch.full((len(prompts), width), pad, dtype=torch.long, device=device)
    mask = torch.zeros_like(ids)
    scored = torch.zeros_like(ids)
    for i, (p, r) in enumerate(zip(prompts, replies, strict=True)):
        ids[i, : len(p) + len(r)] = torch.tensor(p + r, device=device)
        mask[i, : len(p) + len(r)] = 1
        scored[i, len(p) : len(p) + len(r)] = 1
    logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
    logps = logits.log_softmax(-1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return (logps * scored[:, 1:]).sum(-1)


def sigmoid_dpo_loss(
    chosen: Any, rejected: Any, ref_chosen: Any, ref_rejected: Any, beta: float
) -> Any:
    """Pure: mean of −log σ(β((log π_c − log ref_c) − (log π_r − log ref_r))).

    Rafailov et al. 2023, "Direct Preference Optimization", eq. 7."""
    import torch.nn.functional as F

    margin = (chosen - ref_chosen) - (rejected - ref_rejected)
    return -F.logsigmoid(beta * margin).mean()


def replay_dpo_loss(model: Any, peft_model: Any, batch: list[TokenizedPair], **kw: Any) -> Any:
    """DPO loss of `model` on `batch` against `peft_model` with its adapter off (kw: beta, pad)."""
    import torch

    prompts = [p.prompt for p in batch] * 2
    replies = [p.chosen for p in batch] + [p.rejected for p in batch]
    policy = reply_logps(model, prompts, replies, kw["pad"])
    with torch.no_grad(), peft_model.disable_adapter():
        ref = reply_logps(peft_model, prompts, replies, kw["pad"])
    n = len(batch)
    return sigmoid_dpo_loss(policy[:n], policy[n:], ref[:n], ref[n:], kw["beta"])
