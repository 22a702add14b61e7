"""Self-distillation's pure parts: the teacher's hinted prompt and the reverse KL."""

from __future__ import annotations

import pytest

from tuneloop.errors import InputError
from tuneloop.train.data import Row
from tuneloop.train.methods.selfdistill import reverse_kl, teacher_prompt, teacher_rows

TEMPLATE = "\n\n(Reference answer: {hint})"


def test_the_hint_goes_after_the_last_user_turn_and_nothing_else_changes() -> None:
    prompt = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 2 + 2?"},
    ]
    hinted = teacher_prompt(prompt, "4", TEMPLATE)
    assert hinted == [
        prompt[0],
        {"role": "user", "content": "What is 2 + 2?\n\n(Reference answer: 4)"},
    ]
    assert prompt[1]["content"] == "What is 2 + 2?"  # the student's prompt is untouched


def test_rows_without_the_hint_field_are_named() -> None:
    rows = [
        Row("p.jsonl:1", {"prompt": "Q", "answer": 7}),
        Row("p.jsonl:2", {"prompt": "Q", "target": "x"}),
    ]
    assert teacher_rows(rows[:1], "answer", TEMPLATE)[0]["teacher_prompt"][-1]["content"].endswith(
        "(Reference answer: 7)"
    )
    with pytest.raises(InputError, match="p.jsonl:2: .* hint field 'answer'"):
        teacher_rows(rows, "answer", TEMPLATE)


def test_reverse_kl_is_the_masked_token_mean_of_kl_student_to_teacher() -> None:
    import torch

    torch.manual_seed(0)
    student, teacher = torch.randn(2, 3, 5), torch.randn(2, 3, 5)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    p, q = student.softmax(-1), teacher.softmax(-1)
    per_token = (p * (p.log() - q.log())).sum(-1)
    expected = (per_token * mask).sum() / 3
    assert reverse_kl(student, teacher, mask).item() == pytest.approx(expected.item(), rel=1e-5)
    assert reverse_kl(student, student, mask).item() == pytest.approx(0.0, abs=1e-6)
    # Not symmetric: it is KL(student ‖ teacher), not the forward direction.
    assert reverse_kl(teacher, student, mask).item() != pytest.approx(expected.item(), rel=1e-3)
