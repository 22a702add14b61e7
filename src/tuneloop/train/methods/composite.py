"""The composite objective: TRL's GRPO loss + α · self-distillation + β · replay-DPO.

Run: `tuneloop train --method composite --composite-alpha 0.1 --composite-beta 0.1
--composite-pairs preference.jsonl --base MODEL --data prompts.jsonl --out DIR`.

One `GRPOTrainer` subclass, overriding two methods and re-implementing no loss:
- `compute_loss` calls TRL's own (whatever `grpo.loss_type` names — Dr. GRPO by default, see
  grpo.py) and adds α · on-policy self-distillation (selfdistill.py) and β · replay-DPO on
  preference pairs (preference.py). With α = β = 0 it returns TRL's loss tensor untouched and
  computes nothing else, so it is TRL's GRPO step for step
  (tests/train/methods/test_composite.py).
- `_generate_and_score_completions` lets TRL sample and score, then adds the teacher prompt
  (the prompt with the hint, tokenized by TRL's own prompt tokenizer) to the batch, so it is
  shuffled and split with its completions.

Each channel's unweighted loss is logged per step as `loss_grpo`, `loss_self_distill` and
`loss_replay_dpo` (only the channels that are on) and reaches metrics.jsonl; `loss` is the
weighted sum. The extra channels are scaled for gradient accumulation like TRL's loss. Not yet
run under torchrun (nproc > 1): the extra student forwards go through the wrapped model, which
DDP should accept, but no test shows it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from trl import GRPOTrainer

from tuneloop.train.common import without_printer
from tuneloop.train.data import Row, dpo_rows, grpo_rows, read_rows
from tuneloop.train.health import fit
from tuneloop.train.methods.grpo import grpo_trainer_args, warm_started
from tuneloop.train.methods.preference import (
    PairDraws,
    TokenizedPair,
    replay_dpo_loss,
    tokenize_pairs,
)
from tuneloop.train.methods.selfdistill import (
    chunked_reverse_kl,
    completion_logits,
    completion_states,
    head_logits,
    head_reproduces,
    reverse_kl,
    teacher_rows,
)
from tuneloop.train.metrics import MetricsCallback
from tuneloop.train.settings import TrainSettings


class CompositeTrainer(GRPOTrainer):  # type: ignore[misc]
    """GRPOTrainer whose loss adds α · self-distillation and β · replay-DPO to TRL's own."""

    def __init__(
        self,
        *,
        alpha: float,
        beta: float,
        dpo_beta: float,
        pairs: list[TokenizedPair] | None,
        pairs_per_step: int,
        **kw: Any,
    ) -> None:
        super().__init__(**kw)
        self.pad_id: int = kw["processing_class"].pad_token_id
        self.alpha, self.beta, self.dpo_beta = alpha, beta, dpo_beta
        self.chunked: bool | None = None
        """Self-distillation through the chunked head (selfdistill.py); None until checked."""
        seed = self.args.seed + self.accelerator.process_index
        self.pair_draws = PairDraws(pairs, pairs_per_step, seed) if beta > 0 and pairs else None
        if beta > 0 and self.pair_draws is None:
            raise ValueError("replay-DPO (beta > 0) needs preference pairs")

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        from trl.trainer.utils import pad

        out = super()._generate_and_score_completions(inputs)
        if self.alpha > 0:
            ids, _, _ = self._tokenize_prompts([x["teacher_prompt"] for x in inputs])
            device = out["prompt_ids"].device
            rows = [torch.tensor(list(row), device=device) for row in ids]
            masks = [torch.ones_like(row) for row in rows]
            out["teacher_prompt_ids"] = pad(rows, padding_value=self.pad_id, padding_side="left")
            out["teacher_prompt_mask"] = pad(masks, padding_value=0, padding_side="left")
        return out

    def channel_losses(self, model: Any, inputs: dict[str, Any]) -> dict[str, Any]:
        """Each active channel's unweighted loss: `grpo` (TRL's, scaled for accumulation as
        TRL scales it), `self_distill` when α > 0, `replay_dpo` when β > 0."""
        losses = {"grpo": super().compute_loss(model, inputs)}
        if self.alpha > 0:
            losses["self_distill"] = self.self_distill_loss(model, inputs)
        if self.pair_draws is not None:
            losses["replay_dpo"] = replay_dpo_loss(
                model,
                self.accelerator.unwrap_model(model),
                self.pair_draws.draw(),
                beta=self.dpo_beta,
                pad=self.pad_id,
            )
        return losses

    def self_distill_loss(self, model: Any, inputs: dict[str, Any]) -> Any:
        """Reverse KL(student ‖ hinted teacher) over the student's own completion tokens:
        chunked over the output head (selfdistill.py), or from full logits for a model whose
        head does not reproduce its own output (checked once, on the first batch)."""
        completion = inputs["completion_ids"], inputs["completion_mask"]
        mask = completion[1] * inputs["tool_mask"] if "tool_mask" in inputs else completion[1]
        plain = self.accelerator.unwrap_model(model)
        prompt = inputs["prompt_ids"], inputs["prompt_mask"]
        hinted = inputs["teacher_prompt_ids"], inputs["teacher_prompt_mask"]
        if self.chunked is None:
            with torch.no_grad():
                self.chunked = head_reproduces(
                    plain, completion_states(plain, *prompt, *completion)
                )
        if not self.chunked:
            student = completion_logits(model, *prompt, *completion)
            with torch.no_grad():
                teacher = completion_logits(plain, *hinted, *completion)
            return reverse_kl(student / self.temperature, teacher / self.temperature, mask)
        student = completion_states(model, *prompt, *completion).hidden
        with torch.no_grad():
            teacher = completion_states(plain, *hinted, *completion).hidden
        return chunked_reverse_kl(
            lambda h: head_logits(plain, h), student, teacher, mask, self.temperature
        )

    def compute_loss(
        self, model: Any, inputs: Any, return_outputs: bool = False, num_items_in_batch: Any = None
    ) -> Any:
        if return_outputs:
            raise ValueError("the composite trainer does not return outputs")
        losses = self.channel_losses(model, inputs)
        mode = "train" if model.training else "eval"
        accumulation = self.current_gradient_accumulation_steps if mode == "train" else 1
        self._log_loss(mode, "grpo", losses["grpo"] * accumulation)  # per micro-batch, as the rest
        total = losses["grpo"]
        for name, weight in (("self_distill", self.alpha), ("replay_dpo", self.beta)):
            if name in losses:
                self._log_loss(mode, name, losses[name])
                total = total + weight / accumulation * losses[name]
        return total

    def _log_loss(self, mode: str, name: str, value: Any) -> None:
        gathered = self.accelerator.gather(value.detach())
        self._metrics[mode][f"loss_{name}"].append(gathered.mean().item())


def composite_rows(rows: list[Row], s: TrainSettings) -> list[dict[str, Any]]:
    """The dataset: GRPO rows, with the teacher's hinted prompt when self-distillation is on."""
    c = s.composite
    return teacher_rows(rows, c.hint_field, c.hint_template) if c.alpha > 0 else grpo_rows(rows)


def build_composite_trainer(
    model: Any, tokenizer: Any, data: list[dict[str, Any]], s: TrainSettings, **kw: Any
) -> CompositeTrainer:
    """A configured CompositeTrainer on `composite_rows` (kw: grpo_trainer_args's, and
    `pairs`: the preference rows)."""
    c = s.composite
    pair_rows: list[Row] = kw.pop("pairs", [])
    pairs = tokenize_pairs(pair_rows, tokenizer, s.max_length) if c.beta > 0 else None
    trainer = CompositeTrainer(
        **grpo_trainer_args(model, tokenizer, data, s, **kw),
        alpha=c.alpha,
        beta=c.beta,
        dpo_beta=s.dpo_beta,
        pairs=pairs,
        pairs_per_step=c.pairs_batch_size,
    )
    return without_printer(trainer)  # type: ignore[no-any-return]


def train_composite(base: Path, rows: list[Row], out_dir: Path, s: TrainSettings, **kw: Any) -> Any:
    """Train a LoRA adapter on the composite objective; return the trainer."""
    c = s.composite
    # Every bad row and pair is reported before a model is loaded.
    data = composite_rows(rows, s)
    pairs = read_rows(c.pairs) if c.beta > 0 and c.pairs is not None else []
    dpo_rows(pairs)
    model, tokenizer, peft = warm_started(base, rows, out_dir, s, **kw)
    metrics = Path(out_dir) / "metrics.jsonl"
    trainer = build_composite_trainer(
        model,
        tokenizer,
        data,
        s,
        out_dir=out_dir,
        nproc=kw.get("nproc", 1),
        default_scorer=kw.get("default_scorer", "numeric"),
        peft=peft,
        pairs=pairs,
        stage="composite",
        callbacks=[MetricsCallback(metrics, phase="composite", progress=kw.get("progress", True))],
    )
    return fit(trainer, s, "composite")
