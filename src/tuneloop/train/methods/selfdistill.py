"""On-policy self-distillation: the model, shown a hint, teaches itself on its own samples.

The teacher is the student: the same weights (adapter on) given privileged context — the row's
reference answer or a hint, appended to the last user turn — and scoring the completions the
student sampled without it. Its distribution is a stop-gradient target (computed under
`no_grad`), so only the hint-free student moves. Ideas from on-policy distillation (Agarwal
et al. 2024, "GKD"; Gu et al. 2024, "MiniLLM") with a privileged teacher in place of a larger
model.

Deliberate choices:
- **Reverse KL, KL(student ‖ teacher)**, per completion token over the full vocabulary, averaged
  over the batch's completion tokens. The tokens are the student's own samples, so the loss is
  measured where the student puts mass; reverse KL is mode-seeking: it pulls the student onto
  what the teacher favours instead of asking it to cover every continuation the hint makes
  plausible (forward KL would spread the hint-free student over answers it cannot know).
- Both distributions are taken at the sampling temperature, like TRL's GRPO log-probs.
- Costs one extra student forward/backward and one teacher forward per step.
- **Chunked, exact — not top-k.** The loss needs both models' full distributions at every
  completion token; materialised at once that is two B×T×V logit tensors plus their
  log-softmaxes (about 6 × B·T·V·4 bytes: 1.6 GB for 8 completions of 64 tokens on a 131k
  vocabulary). `chunked_reverse_kl` instead takes the two models' final hidden states (the
  input of the output head, B×T×H), keeps only the masked tokens, and computes logits, KL and
  sum `CHUNK_TOKENS` tokens at a time, each chunk under activation checkpointing so that its
  backward recomputes the chunk's logits instead of keeping them: at most a few CHUNK×V tensors
  live at once, the idea of Liger Kernel's fused linear cross-entropy (Hsu et al. 2024). The
  result is the same sum as `reverse_kl` over full logits — no approximation, only float
  summation order (equal to 1e-6 in tests/train/methods/test_selfdistill.py), at the price of
  one more output-head matmul per chunk in the backward. Top-k truncation of the teacher was
  not taken: it drops the tail mass that reverse KL weighs where the student puts it, an error
  that grows with the vocabulary. A model whose output logits are not its head applied to the
  last hidden state (a logit scale the head does not hold) is caught by comparing the last
  position's logits, computed by the same forward for free, and falls back to full logits.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from tuneloop.errors import InputError
from tuneloop.train.data import Row, grpo_rows

CHUNK_TOKENS = 256
"""Completion tokens whose logits `chunked_reverse_kl` holds at once (256 × 131k × 4 bytes =
128 MiB a tensor)."""


def hint_text(value: Any) -> str:
    """A reference field as text (strings as they are, other JSON values as JSON)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def teacher_prompt(prompt: list[dict[str, Any]], hint: str, template: str) -> list[dict[str, Any]]:
    """Pure: `prompt` with `template` (its `{hint}` filled) appended to the last user turn."""
    extra = template.replace("{hint}", hint)
    for i in range(len(prompt) - 1, -1, -1):
        message = prompt[i]
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            hinted = {**message, "content": message["content"] + extra}
            return [*prompt[:i], hinted, *prompt[i + 1 :]]
    return [*prompt, {"role": "user", "content": extra.strip()}]


def teacher_rows(rows: list[Row], hint_field: str, template: str) -> list[dict[str, Any]]:
    """GRPO rows plus `teacher_prompt`: the prompt with the row's `hint_field` appended."""
    out = []
    for row, grpo_row in zip(rows, grpo_rows(rows), strict=True):
        if row.data.get(hint_field) is None:
            raise InputError(
                f"{row.where}: self-distillation (train.composite.alpha > 0) needs the hint "
                f"field {hint_field!r} (set train.composite.hint_field to the row's reference)"
            )
        hinted = teacher_prompt(grpo_row["prompt"], hint_text(row.data[hint_field]), template)
        out.append({**grpo_row, "teacher_prompt": hinted})
    return out


def completion_logits(
    model: Any, prompt_ids: Any, prompt_mask: Any, completion_ids: Any, completion_mask: Any
) -> Any:
    """Logits predicting each completion token: (B, T, V) for completion ids (B, T).

    The prompt is left-padded and the completion right-padded (TRL's layout), so the
    completion is always the last T positions.
    """
    import torch

    ids = torch.cat([prompt_ids, completion_ids], dim=1)
    mask = torch.cat([prompt_mask, completion_mask], dim=1)
    width = completion_ids.size(1)
    return model(input_ids=ids, attention_mask=mask, logits_to_keep=width + 1).logits[:, :-1]


def reverse_kl(student_logits: Any, teacher_logits: Any, mask: Any) -> Any:
    """Pure: mean over masked tokens of KL(student ‖ teacher) = Σ_v p_s (log p_s − log p_t)."""
    student = student_logits.float().log_softmax(-1)
    teacher = teacher_logits.float().log_softmax(-1)
    per_token = (student.exp() * (student - teacher)).sum(-1)
    return (per_token * mask).sum() / mask.sum().clamp(min=1.0)


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


def chunked_reverse_kl(
    head: Any, student_hidden: Any, teacher_hidden: Any, mask: Any, temperature: float
) -> Any:
    """`reverse_kl(head(student_hidden) / T, head(teacher_hidden) / T, mask)`, exactly, with
    only `CHUNK_TOKENS` tokens' logits alive at a time (see the module docstring).

    `head` maps hidden states to logits; the teacher's side runs under no_grad."""
    import torch
    from torch.utils.checkpoint import checkpoint

    keep = mask > 0
    student, teacher, weight = student_hidden[keep], teacher_hidden[keep].detach(), mask[keep]

    def chunk_sum(s: Any, t: Any, w: Any) -> Any:
        log_s = (head(s).float() / temperature).log_softmax(-1)
        with torch.no_grad():
            log_t = (head(t).float() / temperature).log_softmax(-1)
        return ((log_s.exp() * (log_s - log_t)).sum(-1) * w).sum()

    total = student.new_zeros((), dtype=torch.float32)
    for i in range(0, student.size(0), CHUNK_TOKENS):
        j = i + CHUNK_TOKENS
        total = total + checkpoint(
            chunk_sum, student[i:j], teacher[i:j], weight[i:j], use_reentrant=False
        )
    return total / mask.sum().clamp(min=1.0)
