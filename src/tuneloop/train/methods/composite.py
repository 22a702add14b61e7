"""The composite objective: TRL's GRPO loss + α · self-distillation + β · replay-DPO.

Run: `tuneloop train --method composite --composite-alpha 0.1 --composite-beta 0.1
--composite-pairs preference.jsonl --base MODEL --data prompts.jsonl --out DIR`.

One `GRPOTrainer` subclass, overriding two methods and re-implementing no loss:
- `compute_loss` calls TRL's own (whatever `grpo.loss_type` names — Dr. GRPO by default, see
  grpo.py) and adds α · on-policy self-distillation (selfdistill.py) and β · replay-DPO on
  preference pairs (preference.py). With α = β = 0 it returns TRL's loss tensor untouched and
  computes nothing else, so it is TRL's GRPO step for step
  (tests/train/methods/test_composite.py).
- `_generate_and_score_completions` lets TRL sample and score, then adds each sample's
  teacher prompt (the prompt with its hint, tokenized by TRL's own prompt tokenizer) and
  whether it has a hint to the batch, so they are shuffled and split with their completions.
  A hint from the data (`hint_source` `field` or `replay`) is in the dataset's
  `teacher_prompt` column; `scorer_feedback` scores each decoded sample again with the
  reward's scorer and builds the prompt from the verdict.

Scale: the self-distillation loss is a mean divergence per token, in nats, while Dr. GRPO's
loss is an advantage-weighted ratio whose value is about 0 and whose gradient vanishes on
groups with equal rewards, so α weighs quantities of different kinds. On examples/arith at the
base (measure_selfdistill.py scale; README "Teacher replay") the reverse-KL channel's gradient
norm was 73 times GRPO's (JSD β 0.5: 2 times): with α ≥ 0.05 self-distillation steers the step.

Each channel's unweighted loss is logged per step as `loss_grpo`, `loss_self_distill` and
`loss_replay_dpo` (only the channels that are on) and reaches metrics.jsonl; `loss` is the
weighted sum. The extra channels are scaled for gradient accumulation like TRL's loss. Not yet
run under torchrun (nproc > 1): the extra student forwards go through the wrapped model, which
DDP should accept, but no test shows it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import torch
from trl import GRPOTrainer

from tuneloop.errors import InputError
from tuneloop.scorers.resolve import ScorerResolver
from tuneloop.train.common import without_printer
from tuneloop.train.data import Row, dpo_rows, grpo_rows, read_rows
from tuneloop.train.health import fit
from tuneloop.train.methods.divergence import Divergence, divergence_loss
from tuneloop.train.methods.grpo import grpo_trainer_args, warm_started
from tuneloop.train.methods.preference import (
    PairDraws,
    TokenizedPair,
    replay_dpo_loss,
    tokenize_pairs,
)
from tuneloop.train.methods.selfdistill import (
    FeedbackTeacher,
    HintFormat,
    TeacherWeights,
    chunked_divergence,
    completion_logits,
    completion_states,
    field_hints,
    head_adapted,
    head_logits,
    head_reproduces,
    replay_hints,
    teacher_rows,
    teacher_weights,
)
from tuneloop.train.metrics import MetricsCallback
from tuneloop.train.settings import TrainSettings


class SelfDistill(NamedTuple):
    """The self-distillation channel, unpacked from `train.composite`."""

    alpha: float
    """Its weight; 0 = off."""
    divergence: Divergence = Divergence()
    feedback: FeedbackTeacher | None = None
    """`hint_source: scorer_feedback`: builds each sample's teacher prompt after scoring;
    None: the dataset's `teacher_prompt` column is the teacher's prompt."""
    teacher: TeacherWeights = "current"
    """The teacher's weights: the model as it trains, or the frozen base (selfdistill.py)."""


class CompositeTrainer(GRPOTrainer):  # type: ignore[misc]
    """GRPOTrainer whose loss adds α · self-distillation and β · replay-DPO to TRL's own."""

    def __init__(
        self,
        *,
        distill: SelfDistill,
        beta: float,
        dpo_beta: float,
        pairs: list[TokenizedPair] | None,
        pairs_per_step: int,
        **kw: Any,
    ) -> None:
        super().__init__(**kw)
        self.pad_id: int = kw["processing_class"].pad_token_id
        self.decode: Any = kw["processing_class"].batch_decode
        self.alpha, self.beta, self.dpo_beta = distill.alpha, beta, dpo_beta
        self.distill = distill
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
            prompts, hinted = self.teacher_prompts(inputs, out["completion_ids"])
            ids, _, _ = self._tokenize_prompts(prompts)
            device = out["prompt_ids"].device
            rows = [torch.tensor(list(row), device=device) for row in ids]
            masks = [torch.ones_like(row) for row in rows]
            out["teacher_prompt_ids"] = pad(rows, padding_value=self.pad_id, padding_side="left")
            out["teacher_prompt_mask"] = pad(masks, padding_value=0, padding_side="left")
            out["hinted"] = torch.tensor(hinted, dtype=torch.float32, device=device)
        return out

    def teacher_prompts(
        self, inputs: list[dict[str, Any]], completion_ids: Any
    ) -> tuple[list[Any], list[bool]]:
        """Each sample's teacher prompt and whether it carries a hint: the dataset's, or
        (`scorer_feedback`) built from the scorer's verdict on the sample."""
        feedback = self.distill.feedback
        if feedback is None:
            return [x["teacher_prompt"] for x in inputs], [bool(x["hinted"]) for x in inputs]
        texts = self.decode(completion_ids, skip_special_tokens=True)
        built = [
            feedback.prompt(x["prompt"], json.loads(x["item"]), text)
            for x, text in zip(inputs, texts, strict=True)
        ]
        return [p for p, _ in built], [h for _, h in built]

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
        """The divergence between the student and the hinted teacher over the student's own
        hinted completion tokens: chunked over the output head (selfdistill.py), or from full
        logits for a model whose head does not reproduce its own output, or whose head carries
        the adapter when the teacher runs without it (checked once, on the first batch). The
        teacher is the same model under no_grad, with the adapter on (`teacher: current`) or
        off (`base`)."""
        completion = inputs["completion_ids"], inputs["completion_mask"]
        mask = completion[1] * inputs["hinted"][:, None]
        mask = mask * inputs["tool_mask"] if "tool_mask" in inputs else mask
        plain = self.accelerator.unwrap_model(model)
        prompt = inputs["prompt_ids"], inputs["prompt_mask"]
        hinted = inputs["teacher_prompt_ids"], inputs["teacher_prompt_mask"]
        d, t, which = self.distill.divergence, self.temperature, self.distill.teacher
        if self.chunked is None:
            with torch.no_grad():
                states = completion_states(plain, *prompt, *completion)
                # the chunked path applies the head as it is now to the teacher's states
                one_head = which == "current" or not head_adapted(plain)
                self.chunked = one_head and head_reproduces(plain, states)
        if not self.chunked:
            student = completion_logits(model, *prompt, *completion)
            with torch.no_grad(), teacher_weights(plain, which):
                teacher = completion_logits(plain, *hinted, *completion)
            return divergence_loss(student / t, teacher / t, mask, d)
        student = completion_states(model, *prompt, *completion).hidden
        with torch.no_grad(), teacher_weights(plain, which):
            teacher = completion_states(plain, *hinted, *completion).hidden
        return chunked_divergence(lambda h: head_logits(plain, h), student, teacher, mask, t, d)

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


def hint_format(s: TrainSettings) -> HintFormat:
    """`train.composite`'s hint template and placement."""
    return HintFormat(s.composite.hint_template, s.composite.hint_placement)


def composite_rows(
    rows: list[Row], s: TrainSettings, replay: list[Row] | None = None
) -> list[dict[str, Any]]:
    """The dataset: GRPO rows, with the teacher's hinted prompt when self-distillation takes
    its hint from the data (`hint_source` `field`, or `replay` with the replay's rows)."""
    c = s.composite
    if c.alpha == 0 or c.hint_source == "scorer_feedback":
        return grpo_rows(rows)
    if c.hint_source == "replay":
        if replay is None:
            raise InputError(
                "train.composite.hint_source 'replay' needs train.composite.hint_rows "
                "(--composite-hint-rows: the replay's sft.jsonl, which `tuneloop replay` writes)"
            )
        return teacher_rows(rows, replay_hints(rows, replay), hint_format(s))
    return teacher_rows(rows, field_hints(rows, c.hint_field), hint_format(s))


def self_distill(s: TrainSettings, default_scorer: str) -> SelfDistill:
    """`train.composite`'s self-distillation settings as the trainer takes them."""
    c = s.composite
    feedback = None
    if c.hint_source == "scorer_feedback":
        resolver = ScorerResolver(default_scorer, override=s.grpo.scorer)

        def score(item: dict[str, Any], completion: str) -> Any:
            return resolver.for_row(item).fn(item, completion)

        feedback = FeedbackTeacher(score, hint_format(s))
    divergence = Divergence(c.divergence, c.jsd_beta, c.top_k)
    return SelfDistill(c.alpha, divergence, feedback, c.teacher)


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
        distill=self_distill(s, kw["default_scorer"]),
        beta=c.beta,
        dpo_beta=s.dpo_beta,
        pairs=pairs,
        pairs_per_step=c.pairs_batch_size,
    )
    return without_printer(trainer)  # type: ignore[no-any-return]


def train_composite(base: Path, rows: list[Row], out_dir: Path, s: TrainSettings, **kw: Any) -> Any:
    """Train a LoRA adapter on the composite objective; return the trainer."""
    c = s.composite
    # Every bad row, hint and pair is reported before a model is loaded.
    replay = None
    if c.alpha > 0 and c.hint_source == "replay" and c.hint_rows is not None:
        replay = read_rows(c.hint_rows)
    data = composite_rows(rows, s, replay)
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
