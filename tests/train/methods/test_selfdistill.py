"""Self-distillation's pure parts: the teacher's hinted prompt and the reverse KL."""

from __future__ import annotations

from pathlib import Path

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


def test_chunked_reverse_kl_equals_the_full_logits_loss_and_its_gradient(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The chunked loss is the same sum, not an approximation: value and gradient equal
    `reverse_kl` over full logits, with chunks smaller than the masked tokens (3 chunks) and
    a weighted mask (a tool mask's zeros inside a completion)."""
    import torch

    from tuneloop.train.methods import selfdistill

    monkeypatch.setattr(selfdistill, "CHUNK_TOKENS", 4)
    torch.manual_seed(0)
    head = torch.nn.Linear(6, 50, bias=False).double()
    student = torch.randn(3, 5, 6, dtype=torch.float64, requires_grad=True)
    teacher = torch.randn(3, 5, 6, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 0, 1, 1, 1], [1, 1, 1, 1, 1]], dtype=torch.float64)
    assert int(mask.sum()) == 12  # three chunks of 4

    full = reverse_kl(head(student) / 0.7, head(teacher) / 0.7, mask)
    (full_grad,) = torch.autograd.grad(full, student)
    chunked = selfdistill.chunked_reverse_kl(head, student, teacher, mask, 0.7)
    (chunked_grad,) = torch.autograd.grad(chunked, student)
    assert chunked.item() == pytest.approx(full.item(), rel=1e-6)
    assert torch.allclose(chunked_grad, full_grad, rtol=1e-6, atol=1e-9)
    # the teacher is a stop-gradient target: nothing flows into the head from its side
    assert chunked.item() > 0


def test_the_head_check_sees_a_logit_scale_the_head_does_not_hold(tiny_model: Path) -> None:
    """A model whose forward returns its head's logits passes; one that scales them after the
    head (as Cohere's logit_scale does) fails and gets the full-logits path."""
    import torch
    from transformers import AutoModelForCausalLM

    from tuneloop.train.methods.selfdistill import completion_states, head_reproduces

    model = AutoModelForCausalLM.from_pretrained(tiny_model).eval()
    ids = torch.tensor([[5, 6, 7]])
    with torch.no_grad():
        states = completion_states(model, ids, torch.ones_like(ids), ids, torch.ones_like(ids))
    assert states.hidden.shape[:2] == (1, 3)
    assert head_reproduces(model, states)
    scaled = states._replace(last_logits=states.last_logits * 2.0)
    assert not head_reproduces(model, scaled)
