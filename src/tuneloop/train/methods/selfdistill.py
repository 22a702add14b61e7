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
- Costs one extra student forward/backward (full logits: TRL's GRPO forward keeps only the
  sampled tokens' log-probs) and one teacher forward per step.
"""

from __future__ import annotations

import json
from typing import Any

from tuneloop.errors import InputError
from tuneloop.train.data import Row, grpo_rows


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
