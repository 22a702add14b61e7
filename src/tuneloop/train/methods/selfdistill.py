"""On-policy self-distillation: the model, shown a hint, teaches itself on its own samples.

The teacher is the student: the same weights (adapter on) given privileged context — a hint
added to the last user turn — and scoring the completions the student sampled without it. Its
distribution is a stop-gradient target (computed under `no_grad`), so only the hint-free
student moves. Ideas from on-policy distillation (Agarwal et al. 2024, "GKD"; Gu et al. 2024,
"MiniLLM") and context distillation (Snell et al. 2022, "Learning by Distilling Context"),
with a privileged teacher in place of a larger model. The divergence (reverse KL, forward KL
or GKD's generalised JSD, full vocabulary or the teacher's top k) is divergence.py's.

Where the hint comes from (`train.composite.hint_source`):
- `field`: the row's own field (`hint_field`, the reference `answer` by default);
- `replay`: the teacher replay's passing answer to the same prompt (`replay_hints`: its
  `sft.jsonl` rows, matched on the prompt's messages); a prompt no teacher passed has no hint;
- `scorer_feedback`: what the scorer said about the student's own failed sample
  (`feedback_hint`, e.g. "wrong answer; extracted: 16; expected: 15"); a passing sample has
  no hint.
A completion without a hint is left out of the loss (its teacher would be the student itself);
the loss is the mean over the hinted completions' tokens.

The hint is only as good as the teacher's ability to read it. A model never trained on text
like "(Reference answer: 15)" may read it as noise: on examples/arith's tiny model that hint
drops the teacher's own greedy pass@1 from 47.8% to 0.9% (measure_selfdistill.py), and the
student is then distilled towards a broken teacher. `hint_placement: replace` puts the hint in
place of the user turn instead (a restatement of the question the model can read).

The teacher's weights (`train.composite.teacher`): `current` is the model as it trains (adapter
on), so the target moves with every step. Stopping the gradient stops only the direct path: a
step that pulls the student towards the teacher on one input changes the shared weights, and
with them the teacher on every input, and the loss can then fall because the teacher got
worse. `base` runs the teacher with the adapter disabled, the frozen base model: a fixed
target, and on inputs where the hint changes nothing it holds the student near the base.

Deliberate choices:
- The divergence is taken per completion token over the vocabulary and averaged over the
  batch's hinted completion tokens (every token weighs the same, as GKD's `batchmean`), at the
  sampling temperature for both distributions, like TRL's GRPO log-probs.
- Costs one extra student forward/backward and one teacher forward per step.
- **Chunked, exact.** The loss needs both models' full distributions at every completion
  token; materialised at once that is two B×T×V logit tensors plus their log-softmaxes (about
  6 × B·T·V·4 bytes: 1.6 GB for 8 completions of 64 tokens on a 131k vocabulary).
  `chunked_divergence` instead takes the two models' final hidden states (the input of the
  output head, B×T×H), keeps only the masked tokens, and computes logits and divergence
  `CHUNK_TOKENS` tokens at a time, each chunk under activation checkpointing so that its
  backward recomputes the chunk's logits instead of keeping them: at most a few CHUNK×V
  tensors live at once, the idea of Liger Kernel's fused linear cross-entropy (Hsu et al.
  2024). The result is the same sum as `divergence_loss` over full logits — no
  approximation, only float summation order (the value equal to 1e-6, the gradient to 1e-5
  in tests/train/methods/test_selfdistill.py), at the price of one more output-head matmul per
  chunk in the backward. A model whose output logits are not its head applied to the last
  hidden state (a logit scale the head does not hold) is caught by comparing the last
  position's logits, computed by the same forward for free, and falls back to full logits.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Literal, NamedTuple

from tuneloop.errors import InputError
from tuneloop.plugins import Score
from tuneloop.train.data import Row, grpo_rows, prompt_messages
from tuneloop.train.methods.divergence import Divergence, token_divergence

CHUNK_TOKENS = 256
"""Completion tokens whose logits `chunked_divergence` holds at once (256 × 131k × 4 bytes =
128 MiB a tensor)."""

Placement = Literal["append", "replace"]
TeacherWeights = Literal["current", "base"]


class HintFormat(NamedTuple):
    """How a hint enters the teacher's prompt."""

    template: str
    """Text with a `{hint}` slot."""
    placement: Placement = "append"
    """`append`: the filled template is appended to the last user turn; `replace`: it is
    the last user turn's whole text."""


def hint_text(value: Any) -> str:
    """A hint as text (strings as they are, other JSON values as JSON)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def teacher_prompt(
    prompt: list[dict[str, Any]], hint: str, form: HintFormat
) -> list[dict[str, Any]]:
    """Pure: `prompt` with the filled template appended to (or replacing) the last user turn."""
    extra = form.template.replace("{hint}", hint)
    for i in range(len(prompt) - 1, -1, -1):
        message = prompt[i]
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            text = extra if form.placement == "replace" else message["content"] + extra
            return [*prompt[:i], {**message, "content": text}, *prompt[i + 1 :]]
    return [*prompt, {"role": "user", "content": extra.strip()}]


def field_hints(rows: list[Row], field: str) -> list[str]:
    """Each row's `field` as its hint; InputError naming the first row without it."""
    for row in rows:
        if row.data.get(field) is None:
            raise InputError(
                f"{row.where}: self-distillation (train.composite.alpha > 0) needs the hint "
                f"field {field!r} (set train.composite.hint_field to the row's reference)"
            )
    return [hint_text(row.data[field]) for row in rows]


def prompt_key(messages: list[dict[str, Any]]) -> str:
    """The identity of a prompt for matching: its messages' roles and contents."""
    return json.dumps([[m.get("role"), m.get("content")] for m in messages], ensure_ascii=False)


def replay_hints(rows: list[Row], replay: list[Row]) -> list[str | None]:
    """Each row's hint from the replay's distillation rows (`{"messages": [...prompt,
    teacher's passing answer]}`): the answer of the first replay row whose prompt is the row's
    prompt; None where no teacher passed. InputError when no row gets a hint."""
    answers: dict[str, str] = {}
    for r in replay:
        msgs = r.data.get("messages")
        if not isinstance(msgs, list) or not msgs or msgs[-1].get("role") != "assistant":
            raise InputError(
                f"{r.where}: a replay hint row needs 'messages' ending with the teacher's "
                "assistant turn (`tuneloop replay` writes them to sft.jsonl)"
            )
        answers.setdefault(prompt_key(msgs[:-1]), hint_text(msgs[-1].get("content") or ""))
    hints = [answers.get(prompt_key(prompt_messages(r.data, r.where))) for r in rows]
    if rows and all(h is None for h in hints):
        raise InputError(
            f"train.composite.hint_rows: none of its {len(replay)} rows answers a training "
            f"prompt (first training row: {rows[0].where}); the rows must be the replay of "
            "the same prompts"
        )
    return hints


def feedback_hint(score: Score) -> str | None:
    """What a scorer said about a failed sample, as a hint ("wrong answer; extracted: 16;
    expected: 15"); None for a passing one (value 1)."""
    if score.value >= 1.0:
        return None
    detail = dict(score.detail)
    reason = detail.pop("reason", "failed")
    shown = (f"{k}: {_plain(v)}" for k, v in detail.items() if k != "method")
    return "; ".join([str(reason), *shown])


def _plain(value: Any) -> str:
    """16.0 → '16': the scorer's floats as a person would write them."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def teacher_rows(
    rows: list[Row], hints: Sequence[str | None], form: HintFormat
) -> list[dict[str, Any]]:
    """GRPO rows plus `teacher_prompt` (the prompt with its hint) and `hinted` (False where
    the row has no hint: its teacher prompt is the student's and it is not distilled)."""
    out = []
    for grpo_row, hint in zip(grpo_rows(rows), hints, strict=True):
        prompt = grpo_row["prompt"]
        teacher = prompt if hint is None else teacher_prompt(prompt, hint, form)
        out.append({**grpo_row, "teacher_prompt": teacher, "hinted": hint is not None})
    return out


class FeedbackTeacher(NamedTuple):
    """`scorer_feedback` hints: each sample scored again after generation."""

    score: Callable[[dict[str, Any], str], Score]
    """The item's scorer (the GRPO reward's)."""
    form: HintFormat

    def prompt(
        self, prompt: list[dict[str, Any]], item: dict[str, Any], completion: str
    ) -> tuple[list[dict[str, Any]], bool]:
        """(the teacher's prompt for this sample, whether it is hinted)."""
        hint = feedback_hint(self.score(item, completion))
        if hint is None:
            return prompt, False
        return teacher_prompt(prompt, hint, self.form), True


def completion_logits(
    model: Any, prompt_ids: Any, prompt_mask: Any, completion_ids: Any, completion_mask: Any
) -> Any:
    """Logits predicting each completion token: (B, T, V) for completion ids (B, T).

    The prompt is left-padded and the completion right-padded (TRL's layout), so the
    completion is always the last T positions, whatever each prompt's length.
    """
    import torch

    ids = torch.cat([prompt_ids, completion_ids], dim=1)
    mask = torch.cat([prompt_mask, completion_mask], dim=1)
    width = completion_ids.size(1)
    return model(input_ids=ids, attention_mask=mask, logits_to_keep=width + 1).logits[:, :-1]


class CompletionStates(NamedTuple):
    hidden: Any
    """Final hidden states predicting each completion token (B, T, H): the head's input."""
    last_hidden: Any
    """The last position's final hidden state (B, 1, H)."""
    last_logits: Any
    """The logits the forward itself returned for the last position (B, 1, V)."""


def completion_states(
    model: Any, prompt_ids: Any, prompt_mask: Any, completion_ids: Any, completion_mask: Any
) -> CompletionStates:
    """One forward over prompt + completion that keeps the final hidden states, and the
    logits of the last position only."""
    import torch

    ids = torch.cat([prompt_ids, completion_ids], dim=1)
    mask = torch.cat([prompt_mask, completion_mask], dim=1)
    width = completion_ids.size(1)
    out = model(input_ids=ids, attention_mask=mask, logits_to_keep=1, output_hidden_states=True)
    final = out.hidden_states[-1]
    return CompletionStates(final[:, -(width + 1) : -1], final[:, -1:], out.logits)


def teacher_weights(model: Any, which: TeacherWeights) -> AbstractContextManager[Any]:
    """Where the teacher runs: `current`, the model as it trains (adapter on); `base`, the
    PEFT model with its adapter disabled — the frozen base (module docstring)."""
    return model.disable_adapter() if which == "base" else nullcontext()


def head_adapted(model: Any) -> bool:
    """Does the output head carry adapter weights (LoRA on `lm_head`)? Then the teacher's
    head differs between `current` and `base`."""
    return any("lora_" in name for name, _ in model.get_output_embeddings().named_parameters())


def head_logits(model: Any, hidden: Any) -> Any:
    """The output head applied to final hidden states, with the config's final logit
    soft-capping (Gemma 2) when it has one."""
    import torch

    logits = model.get_output_embeddings()(hidden)
    cap = getattr(model.config.get_text_config(), "final_logit_softcapping", None)
    return torch.tanh(logits / cap) * cap if cap else logits


def head_reproduces(model: Any, states: CompletionStates) -> bool:
    """Does `head_logits` of the last position's hidden state give the logits the forward
    itself returned for it (so that the chunked loss sees the model's own distribution)?"""
    import torch

    with torch.no_grad():
        mine = head_logits(model, states.last_hidden).float()
    return bool(torch.allclose(mine, states.last_logits.float(), rtol=1e-3, atol=1e-3))


def chunked_divergence(
    head: Any,
    student_hidden: Any,
    teacher_hidden: Any,
    mask: Any,
    temperature: float,
    d: Divergence,
) -> Any:
    """`divergence_loss(head(student_hidden) / T, head(teacher_hidden) / T, mask, d)`,
    exactly, with only `CHUNK_TOKENS` tokens' logits alive at a time (module docstring).

    `head` maps hidden states to logits; the teacher's side runs under no_grad."""
    import torch
    from torch.utils.checkpoint import checkpoint

    keep = mask > 0
    student, teacher, weight = student_hidden[keep], teacher_hidden[keep].detach(), mask[keep]

    def chunk_sum(s: Any, t: Any, w: Any) -> Any:
        log_s = (head(s).float() / temperature).log_softmax(-1)
        with torch.no_grad():
            log_t = (head(t).float() / temperature).log_softmax(-1)
        return (token_divergence(log_s, log_t, d) * w).sum()

    total = student.new_zeros((), dtype=torch.float32)
    for i in range(0, student.size(0), CHUNK_TOKENS):
        j = i + CHUNK_TOKENS
        total = total + checkpoint(
            chunk_sum, student[i:j], teacher[i:j], weight[i:j], use_reentrant=False
        )
    return total / mask.sum().clamp(min=1.0)
