"""A plain PyTorch SFT loop over the same tokenized rows as `methods/sft.py`, for DiLoCo and
its DDP reference.

DiLoCo (torchft) hooks the inner optimizer's `step` and owns the schedule of outer steps, and
its recovery swaps the model's and the optimizer's state between steps: inside TRL's
`SFTTrainer` both would fight the trainer's own loop, accelerate's wrapping and its
checkpointing. So the DiLoCo path (`diloco_replica.py`) and the DDP run it is measured against
(`plain_ddp.py`) share this small loop instead. What it keeps from `methods/sft.py`: the rows
(`data.sft_rows`), the rendering and the assistant-only loss mask (`tokenized_rows`), the
LoRA config, float32 on CPU, AdamW at `train.learning_rate` (TRL's default optimizer, weight
decay 0) with `train.lr_scheduler` and warm-up, and gradient clipping at
`train.max_grad_norm`. What it does not do: checkpoints (`train.checkpoint`) and the health
stop rules; DiLoCo's fault tolerance is recovery from a live peer instead.

Batches are a pure function of the step (`batch_indices`): the global batch of step `g` is a
slice of a seeded permutation of the rows, and part `r` of `parts` takes its `r`-th share.
DDP rank r and DiLoCo replica r therefore see the same rows at the same step, so the two runs
train on the same samples in the same order.
"""

from __future__ import annotations

import functools
import math
import random
from pathlib import Path
from typing import Any

from tuneloop.train.common import load_model, load_tokenizer, lora_config
from tuneloop.train.data import Row, sft_rows
from tuneloop.train.settings import TrainSettings


def batch_indices(n_rows: int, step: int, batch: int, part: int, parts: int, seed: int) -> list:
    """Pure: the row indices of part `part` (of `parts`) of global batch `step` (size `batch`).

    Rows are drawn epoch by epoch from a permutation seeded by (`seed`, epoch), so each row is
    seen once per epoch whatever the number of parts.
    """
    share = batch // parts
    start = step * batch + part * share
    out = []
    for pos in range(start, start + share):
        epoch, offset = divmod(pos, n_rows)
        out.append(_order(n_rows, seed, epoch)[offset])
    return out


@functools.lru_cache(maxsize=4)
def _order(n_rows: int, seed: int, epoch: int) -> tuple[int, ...]:
    order = list(range(n_rows))
    random.Random(f"{seed}:{epoch}").shuffle(order)
    return tuple(order)


def lr_factor(s: TrainSettings, step: int) -> float:
    """The learning-rate multiplier at inner step `step` (transformers' schedule)."""
    import torch
    from transformers.optimization import get_scheduler

    warmup = math.ceil(s.warmup_ratio * s.steps)
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    sched = get_scheduler(s.lr_scheduler, opt, num_warmup_steps=warmup, num_training_steps=s.steps)
    return float(sched.lr_lambdas[0](step))  # type: ignore[attr-defined]


class PlainSft:
    """The LoRA model, its tokenized rows and the inner optimizer of one process."""

    def __init__(self, base: Path, rows: list[Row], s: TrainSettings) -> None:
        import torch
        from peft import get_peft_model

        from tuneloop.train.methods import tokenized_rows  # transformers, TRL

        tokenizer = load_tokenizer(base)
        self.settings = s
        self.pad_id = int(tokenizer.pad_token_id)
        self.rows = tokenized_rows(tokenizer, sft_rows(rows), s.max_length)
        # The same seed in every process: the replicas start from the same adapter.
        torch.manual_seed(s.seed)
        self.model = get_peft_model(load_model(base), lora_config(s))
        self.model.train()
        self.params = {n: p for n, p in self.model.named_parameters() if p.requires_grad}
        self.optimizer = torch.optim.AdamW(
            list(self.params.values()), lr=s.learning_rate, weight_decay=0.0
        )
        self._factors = [lr_factor(s, g) for g in range(s.steps)]

    def collate(self, indices: list[int]) -> dict[str, Any]:
        """input_ids, attention_mask and labels (-100 off the assistant turns), right-padded."""
        import torch

        rows = [self.rows[i] for i in indices]
        width = max(len(r["input_ids"]) for r in rows)
        ids, att, lab = [], [], []
        for r in rows:
            pad = width - len(r["input_ids"])
            ids.append(r["input_ids"] + [self.pad_id] * pad)
            att.append([1] * len(r["input_ids"]) + [0] * pad)
            masked = [
                t if m else -100 for t, m in zip(r["input_ids"], r["assistant_masks"], strict=True)
            ]
            lab.append(masked + [-100] * pad)
        return {
            "input_ids": torch.tensor(ids),
            "attention_mask": torch.tensor(att),
            "labels": torch.tensor(lab),
        }

    def step(self, model: Any, indices: list[int], g: int) -> float:
        """One inner optimizer step at global step `g` on rows `indices`; the loss."""
        import torch

        self.optimizer.zero_grad(set_to_none=True)
        loss = model(**self.collate(indices)).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(self.params.values()), self.settings.max_grad_norm)
        factor = self._factors[min(g, len(self._factors) - 1)]
        for group in self.optimizer.param_groups:
            group["lr"] = self.settings.learning_rate * factor
        self.optimizer.step()
        return float(loss.detach())

    def eval_loss(self, max_rows: int = 512, batch: int = 64) -> float:
        """Token-weighted loss of the current adapter on the first `max_rows` rows."""
        import torch

        total, tokens = 0.0, 0
        self.model.eval()
        with torch.no_grad():
            for start in range(0, min(max_rows, len(self.rows)), batch):
                idx = list(range(start, min(start + batch, max_rows, len(self.rows))))
                b = self.collate(idx)
                n = int((b["labels"][:, 1:] != -100).sum())
                total += float(self.model(**b).loss) * n
                tokens += n
        self.model.train()
        return total / max(tokens, 1)
