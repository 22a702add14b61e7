"""Self-distillation's parts: the teacher's hinted prompt from each hint source, the teacher's
distribution at the right positions, and the chunked loss equal to the full one."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuneloop.errors import InputError
from tuneloop.plugins import Score
from tuneloop.registry import scorers
from tuneloop.train.data import Row
from tuneloop.train.methods.divergence import Divergence, divergence_loss
from tuneloop.train.methods.selfdistill import (
    FeedbackTeacher,
    HintFormat,
    feedback_hint,
    field_hints,
    replay_hints,
    teacher_prompt,
    teacher_rows,
)

APPEND = HintFormat("\n\n(Reference answer: {hint})")


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def test_the_hint_goes_after_the_last_user_turn_and_nothing_else_changes() -> None:
    prompt = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 2 + 2?"},
    ]
    hinted = teacher_prompt(prompt, "4", APPEND)
    assert hinted == [
        prompt[0],
        {"role": "user", "content": "What is 2 + 2?\n\n(Reference answer: 4)"},
    ]
    assert prompt[1]["content"] == "What is 2 + 2?"  # the student's prompt is untouched


def test_a_replacing_hint_is_the_whole_last_user_turn() -> None:
    prompt = _user("What is the sum of 8 and 7?")
    assert teacher_prompt(prompt, "What is 8 + 7?", HintFormat("{hint}", "replace")) == _user(
        "What is 8 + 7?"
    )


def test_rows_without_the_hint_field_are_named() -> None:
    rows = [
        Row("p.jsonl:1", {"prompt": "Q", "answer": 7}),
        Row("p.jsonl:2", {"prompt": "Q", "target": "x"}),
    ]
    (first,) = teacher_rows(rows[:1], field_hints(rows[:1], "answer"), APPEND)
    assert first["teacher_prompt"][-1]["content"].endswith("(Reference answer: 7)")
    assert first["hinted"] is True
    with pytest.raises(InputError, match="p.jsonl:2: .* hint field 'answer'"):
        field_hints(rows, "answer")


def test_replay_hints_are_the_teachers_answer_to_the_same_prompt() -> None:
    rows = [
        Row("g.jsonl:1", {"messages": _user("Add 1 and 2."), "answer": "3"}),
        Row("g.jsonl:2", {"messages": _user("Add 5 and 5."), "answer": "10"}),
        Row("g.jsonl:3", {"prompt": "Add 1 and 2.", "answer": "3"}),  # same prompt, as a string
    ]
    replay = [
        Row("sft.jsonl:1", {"messages": [*_user("Add 1 and 2."), _assistant("3")], "teacher": "a"}),
        Row("sft.jsonl:2", {"messages": [*_user("Add 1 and 2."), _assistant("4")]}),  # first wins
        Row("sft.jsonl:3", {"messages": [*_user("Add 7 and 7."), _assistant("14")]}),
    ]
    assert replay_hints(rows, replay) == ["3", None, "3"]
    data = teacher_rows(rows, replay_hints(rows, replay), APPEND)
    assert [r["hinted"] for r in data] == [True, False, True]
    assert data[1]["teacher_prompt"] == data[1]["prompt"]  # no hint: the student's own prompt
    with pytest.raises(InputError, match="none of its 1 rows answers a training prompt"):
        replay_hints(rows, replay[2:])
    with pytest.raises(InputError, match="sft.jsonl:9: a replay hint row needs 'messages'"):
        replay_hints(rows, [Row("sft.jsonl:9", {"messages": _user("Add 1 and 2.")})])


def _assistant(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


def test_scorer_feedback_is_the_numeric_scorers_verdict_on_a_failed_sample() -> None:
    score = scorers.get("numeric")()
    item = {"answer": "15"}
    assert feedback_hint(score(item, "16")) == "wrong answer; extracted: 16; expected: 15"
    assert feedback_hint(score(item, "sixteen")) == "no number in completion"
    assert feedback_hint(score(item, "15")) is None  # passed: no hint, not distilled
    assert feedback_hint(Score(0.5)) == "failed"  # partial credit, no reason given
    teacher = FeedbackTeacher(score, HintFormat("\n\n(Your last answer: {hint})"))
    prompt = _user("What is 8 + 7?")
    assert teacher.prompt(prompt, item, "16") == (
        _user("What is 8 + 7?\n\n(Your last answer: wrong answer; extracted: 16; expected: 15)"),
        True,
    )
    assert teacher.prompt(prompt, item, "15") == (prompt, False)


def test_the_teachers_logits_at_each_position_are_a_direct_forward_on_its_prefix(
    tiny_model: Path,
) -> None:
    """Teacher and student prompts have different lengths and are left-padded; the logits the
    loss compares at completion position t are the model's next-token logits after
    prompt + completion[:t], for both `completion_logits` and the chunked path's hidden
    states through the head — no off-by-one, whatever the padding."""
    import torch
    from transformers import AutoModelForCausalLM

    from tuneloop.train.methods.selfdistill import (
        completion_logits,
        completion_states,
        head_logits,
    )

    model = AutoModelForCausalLM.from_pretrained(tiny_model).eval()
    prompts = [[5, 6, 7], [8, 9, 10, 11, 12, 13]]
    completions = [[20, 21, 22, 23], [24, 25]]
    width_p, width_c = max(map(len, prompts)), max(map(len, completions))
    prompt_ids = torch.zeros(2, width_p, dtype=torch.long)
    prompt_mask = torch.zeros_like(prompt_ids)
    completion_ids = torch.zeros(2, width_c, dtype=torch.long)
    completion_mask = torch.zeros_like(completion_ids)
    for i, (p, c) in enumerate(zip(prompts, completions, strict=True)):
        prompt_ids[i, width_p - len(p) :], prompt_mask[i, width_p - len(p) :] = torch.tensor(p), 1
        completion_ids[i, : len(c)], completion_mask[i, : len(c)] = torch.tensor(c), 1
    batch = (prompt_ids, prompt_mask, completion_ids, completion_mask)
    with torch.no_grad():
        full = completion_logits(model, *batch)
        chunked = head_logits(model, completion_states(model, *batch).hidden)
        for i, (p, c) in enumerate(zip(prompts, completions, strict=True)):
            for t in range(len(c)):
                direct = model(input_ids=torch.tensor([p + c[:t]])).logits[0, -1]
                assert torch.allclose(full[i, t], direct, atol=1e-5), (i, t)
                assert torch.allclose(chunked[i, t], direct, atol=1e-5), (i, t)


@pytest.mark.parametrize(
    "d",
    [
        Divergence("reverse_kl"),
        Divergence("forward_kl"),
        Divergence("jsd", 0.5),
        Divergence("jsd", 0.1),
        Divergence("reverse_kl", top_k=7),
    ],
    ids=lambda d: f"{d.kind}-{d.beta}-{d.top_k}",
)
def test_the_chunked_divergence_equals_the_full_logits_loss_and_its_gradient(
    d: Divergence, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chunked loss is the same sum, not an approximation: value and gradient equal
    `divergence_loss` over full logits, with chunks smaller than the masked tokens (3 chunks)
    and a weighted mask (a tool mask's zeros inside a completion)."""
    import torch

    from tuneloop.train.methods import selfdistill

    monkeypatch.setattr(selfdistill, "CHUNK_TOKENS", 4)
    torch.manual_seed(0)
    head = torch.nn.Linear(6, 50, bias=False).double()
    student = torch.randn(3, 5, 6, dtype=torch.float64, requires_grad=True)
    teacher = torch.randn(3, 5, 6, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 0, 1, 1, 1], [1, 1, 1, 1, 1]], dtype=torch.float64)
    assert int(mask.sum()) == 12  # three chunks of 4

    full = divergence_loss(head(student) / 0.7, head(teacher) / 0.7, mask, d)
    (full_grad,) = torch.autograd.grad(full, student)
    chunked = selfdistill.chunked_divergence(head, student, teacher, mask, 0.7, d)
    (chunked_grad,) = torch.autograd.grad(chunked, student)
    assert chunked.item() == pytest.approx(full.item(), rel=1e-6)
    assert torch.allclose(chunked_grad, full_grad, rtol=1e-5, atol=1e-8)  # float32 inside
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
