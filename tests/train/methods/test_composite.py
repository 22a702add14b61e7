"""The composite objective: TRL's GRPO when its extra channels are off; every channel learns.

With alpha = beta = 0 the trainer must be TRL's GRPOTrainer step for step — same samples, same
losses, same adapter weights, bit for bit on CPU (the override returns TRL's loss tensor
untouched and draws no random numbers). Each channel's gradient is finite and non-zero on the
tiny Qwen2 and on a tiny Llama built here, which is how "any causal LM" is shown without
downloads. The channel losses reach metrics.jsonl through the real `train` entry point.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import arith_rows, write_jsonl
from pydantic import ValidationError
from tinymodel import build_tiny_model

from tuneloop.errors import InputError
from tuneloop.plugins import Score
from tuneloop.registry import scorers
from tuneloop.train.common import load_model, load_tokenizer
from tuneloop.train.data import grpo_rows, read_rows
from tuneloop.train.methods.composite import build_composite_trainer, composite_rows
from tuneloop.train.methods.divergence import Divergence, divergence_loss
from tuneloop.train.methods.grpo import build_grpo_trainer
from tuneloop.train.methods.selfdistill import feedback_hint
from tuneloop.train.run import train
from tuneloop.train.settings import TrainSettings

CHANNELS = {"grpo", "self_distill", "replay_dpo"}


def _first_char(**_: Any) -> Any:
    """A reward that differs between random completions, so every group has a spread."""

    def score(item: dict, completion: str) -> Score:
        return Score((ord(completion[0]) % 7) / 6 if completion else 0.0)

    return score


@pytest.fixture(autouse=True)
def _spread_scorer() -> None:
    if "test_first_char" not in scorers:
        scorers.add("test_first_char", _first_char, origin="tests")


@pytest.fixture
def pairs(tmp_path: Path) -> Path:
    rows = []
    for r in arith_rows(4):
        wrong = str(int(r["answer"]) + 1)
        rows.append({"prompt": r["messages"], "chosen": r["answer"], "rejected": wrong})
    return write_jsonl(tmp_path / "pairs.jsonl", rows)


def _settings(steps: int = 3, scorer: str = "test_first_char", **composite: Any) -> TrainSettings:
    return TrainSettings(
        method="composite",
        steps=steps,
        batch_size=2,
        grpo={"group_size": 4, "max_completion_length": 4, "scorer": scorer},
        lora={"r": 4, "alpha": 8},
        learning_rate=5e-2,
        seed=0,
        composite=composite,
    )


def _trained(build: Any, base: Path, rows: Any, out: Path, s: TrainSettings) -> Any:
    import torch

    torch.manual_seed(0)  # the LoRA init draws from torch's RNG before Trainer seeds it
    trainer = build(
        load_model(base), load_tokenizer(base), rows, s, out_dir=out, nproc=1, default_scorer="x"
    )
    trainer.train()
    return trainer


def _lora(trainer: Any) -> dict[str, Any]:
    return {k: v for k, v in trainer.model.state_dict().items() if "lora_" in k}


def test_with_alpha_and_beta_zero_it_is_trl_grpo_step_for_step(
    tiny_model: Path, prompts: Path, tmp_path: Path
) -> None:
    rows = read_rows(prompts)
    s = _settings()
    plain = _trained(build_grpo_trainer, tiny_model, grpo_rows(rows), tmp_path / "trl", s)
    ours = _trained(
        build_composite_trainer, tiny_model, composite_rows(rows, s), tmp_path / "ours", s
    )
    history = [
        [(h["loss"], h["reward"]) for h in t.state.log_history if "loss" in h]
        for t in (plain, ours)
    ]
    assert len(history[0]) == 3
    assert history[0] == history[1]  # exact: same samples, same rewards, same loss
    assert [h["loss_grpo"] for h in ours.state.log_history if "loss" in h] == [
        loss for loss, _ in history[0]
    ]
    theirs, mine = _lora(plain), _lora(ours)
    assert theirs.keys() == mine.keys() and theirs
    assert max((theirs[k] - mine[k]).abs().max().item() for k in theirs) == 0.0
    assert any(v.abs().max().item() > 0 for k, v in mine.items() if "lora_B" in k)  # it moved


def _check_teacher_sees_its_own_rows_answer(tokenizer: Any, inputs: dict) -> None:
    """After TRL's shuffle, row i's teacher prompt is row i's question plus row i's answer."""
    decode = tokenizer.batch_decode
    students = decode(inputs["prompt_ids"], skip_special_tokens=True)
    teachers = decode(inputs["teacher_prompt_ids"], skip_special_tokens=True)
    for student, teacher in zip(students, teachers, strict=True):
        a, b = re.search(r"What is (\d) \+ (\d)\?", student).groups()  # type: ignore[union-attr]
        assert f"What is {a} + {b}?\n\n(Reference answer: {int(a) + int(b)})" in teacher


def _first_batch(
    base: Path, prompts: Path, pairs: Path, out: Path, **more: Any
) -> tuple[Any, Any, Any]:
    """(trainer, its model in train mode, the first prepared batch) with every channel on
    (`more`: the reward's `scorer`, more of train.composite's settings)."""
    import torch

    s = _settings(steps=1, alpha=1.0, beta=1.0, pairs=pairs, **more)
    replay = read_rows(s.composite.hint_rows) if s.composite.hint_rows else None
    torch.manual_seed(0)
    trainer = build_composite_trainer(
        load_model(base),
        load_tokenizer(base),
        composite_rows(read_rows(prompts), s, replay),
        s,
        out_dir=out,
        nproc=1,
        default_scorer="numeric",
        pairs=read_rows(pairs),
    )
    model = trainer.model
    model.train()
    trainer.current_gradient_accumulation_steps = 1  # set by the training loop, outside it here
    inputs = trainer._prepare_inputs(next(iter(trainer.get_train_dataloader())))
    return trainer, model, inputs


def _channel_gradient_norms(base: Path, prompts: Path, pairs: Path, out: Path) -> dict:
    trainer, model, inputs = _first_batch(base, prompts, pairs, out)
    _check_teacher_sees_its_own_rows_answer(trainer.processing_class, inputs)
    norms = {}
    for name, loss in trainer.channel_losses(model, inputs).items():
        model.zero_grad()
        loss.backward()
        grads = [p.grad for p in model.parameters() if p.requires_grad and p.grad is not None]
        norms[name] = math.sqrt(sum(float((g.float() ** 2).sum()) for g in grads))
    return norms


@pytest.mark.parametrize("arch", ["qwen2", "llama"])
def test_each_channel_has_a_finite_nonzero_gradient(
    arch: str, tiny_model: Path, prompts: Path, pairs: Path, tmp_path: Path
) -> None:
    base = tiny_model if arch == "qwen2" else build_tiny_model(tmp_path / "m", arch=arch)
    norms = _channel_gradient_norms(base, prompts, pairs, tmp_path / "out")
    print(f"{arch} gradient norms: {norms}")
    assert set(norms) == CHANNELS
    assert all(math.isfinite(n) and n > 0 for n in norms.values()), norms


@pytest.mark.parametrize("divergence", ["reverse_kl", "jsd"])
def test_self_distillation_through_the_chunked_head_is_the_full_logits_loss(
    divergence: str, tiny_model: Path, prompts: Path, pairs: Path, tmp_path: Path
) -> None:
    """The trainer checks the head once and takes the chunked path; the full-logits path on
    the same batch gives the same loss and the same gradient, for the configured divergence."""
    import torch

    trainer, model, inputs = _first_batch(
        tiny_model, prompts, pairs, tmp_path / "out", divergence=divergence
    )
    assert trainer.distill.divergence == Divergence(divergence)  # type: ignore[arg-type]
    results = {}
    for chunked in (None, False):
        trainer.chunked = chunked
        model.zero_grad()
        loss = trainer.self_distill_loss(model, inputs)
        loss.backward()
        grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
        results[chunked] = (loss.item(), grads)
        if chunked is None:
            assert trainer.chunked is True  # the tiny Qwen2's head reproduces its logits
    (chunked_loss, chunked_grads), (full_loss, full_grads) = results[None], results[False]
    assert chunked_loss == pytest.approx(full_loss, rel=1e-5)
    assert len(chunked_grads) == len(full_grads) > 0
    pairs = zip(chunked_grads, full_grads, strict=True)
    assert all(torch.allclose(a, b, rtol=1e-4, atol=1e-7) for a, b in pairs)


def test_scorer_feedback_teachers_read_the_scorers_verdict_on_each_failed_sample(
    tiny_model: Path, prompts: Path, pairs: Path, tmp_path: Path
) -> None:
    """Each sample's teacher prompt is its own prompt plus what the numeric scorer said about
    that very sample; a passing sample has no hint and is left out of the loss."""
    trainer, model, inputs = _first_batch(
        tiny_model,
        prompts,
        pairs,
        tmp_path / "out",
        scorer="numeric",
        hint_source="scorer_feedback",
        hint_template="\n\n(Feedback: {hint})",
    )
    score = scorers.get("numeric")()
    decode = trainer.processing_class.batch_decode
    students = decode(inputs["prompt_ids"], skip_special_tokens=True)
    teachers = decode(inputs["teacher_prompt_ids"], skip_special_tokens=True)
    completions = decode(inputs["completion_ids"], skip_special_tokens=True)
    for student, teacher, completion, hinted in zip(
        students, teachers, completions, inputs["hinted"].tolist(), strict=True
    ):
        question = re.search(r"What is (\d) \+ (\d)\?", student)
        assert question is not None
        a, b = question.groups()
        hint = feedback_hint(score({"answer": str(int(a) + int(b))}, completion))
        assert hinted == float(hint is not None)
        said = "" if hint is None else f"\n\n(Feedback: {hint})"
        assert teacher == student.replace(question.group(0), question.group(0) + said)
    assert inputs["hinted"].sum() > 0  # a random model fails most samples
    loss = trainer.self_distill_loss(model, inputs)
    assert math.isfinite(loss.item()) and loss.item() > 0


def test_replay_hints_distill_only_the_prompts_a_teacher_answered(
    tiny_model: Path, prompts: Path, pairs: Path, tmp_path: Path
) -> None:
    """Half the prompts have a replay answer: those are hinted with it, the rest are not, and
    a batch without any hinted sample has a self-distillation loss of exactly 0."""
    rows = read_rows(prompts)
    answered = [r.data for r in rows[::2]]
    replay = write_jsonl(
        tmp_path / "sft.jsonl",
        [
            {"messages": [*r["messages"], {"role": "assistant", "content": r["answer"]}]}
            for r in answered
        ],
    )
    trainer, model, inputs = _first_batch(
        tiny_model, prompts, pairs, tmp_path / "out", hint_source="replay", hint_rows=replay
    )
    teachers = trainer.processing_class.batch_decode(
        inputs["teacher_prompt_ids"], skip_special_tokens=True
    )
    with_answer = {r["messages"][0]["content"] for r in answered}
    students = trainer.processing_class.batch_decode(inputs["prompt_ids"], skip_special_tokens=True)
    for student, teacher, hinted in zip(students, teachers, inputs["hinted"].tolist(), strict=True):
        question = re.search(r"What is \d \+ \d\?", student).group(0)  # type: ignore[union-attr]
        assert hinted == float(question in with_answer)
        assert ("(Reference answer: " in teacher) == (question in with_answer)
    none = {**inputs, "hinted": inputs["hinted"] * 0}
    assert trainer.self_distill_loss(model, none).item() == 0.0


def test_a_base_teacher_runs_without_the_adapter(
    tiny_model: Path, prompts: Path, pairs: Path, tmp_path: Path
) -> None:
    """`teacher: base`: whatever the adapter has learned, the teacher is the base model — the
    loss equals one whose teacher is a separately loaded base; `current` differs from it once
    the adapter is non-zero."""
    import torch

    from tuneloop.train.methods.selfdistill import completion_logits

    trainer, model, inputs = _first_batch(
        tiny_model, prompts, pairs, tmp_path / "out", teacher="base"
    )
    torch.manual_seed(1)
    with torch.no_grad():
        for name, weight in model.named_parameters():
            if "lora_B" in name:
                weight.normal_(0.0, 0.5)  # an adapter that has learned something
    base = load_model(tiny_model).eval()
    t = trainer.temperature
    completion = inputs["completion_ids"], inputs["completion_mask"]
    student = completion_logits(model, inputs["prompt_ids"], inputs["prompt_mask"], *completion)
    with torch.no_grad():
        hinted = inputs["teacher_prompt_ids"], inputs["teacher_prompt_mask"]
        teacher = completion_logits(base, *hinted, *completion)
    mask = completion[1] * inputs["hinted"][:, None]
    expected = divergence_loss(student / t, teacher / t, mask, Divergence()).item()
    assert trainer.self_distill_loss(model, inputs).item() == pytest.approx(expected, rel=1e-5)
    assert trainer.chunked is True  # lm_head carries no adapter: the chunked path
    trainer.distill = trainer.distill._replace(teacher="current")
    assert trainer.self_distill_loss(model, inputs).item() != pytest.approx(expected, rel=1e-2)


def test_replay_hints_need_their_rows_and_settings_their_known_values(prompts: Path) -> None:
    s = _settings(alpha=0.5, hint_source="replay")
    with pytest.raises(InputError, match="needs train.composite.hint_rows"):
        composite_rows(read_rows(prompts), s)
    bad = (("divergence", "kl"), ("hint_source", "reference"), ("jsd_beta", 2), ("teacher", "x"))
    for key, value in bad:
        with pytest.raises(ValidationError, match=f"composite.{key}"):
            _settings(**{key: value})
    with pytest.raises(ValidationError, match="composite.hint_soruce"):
        _settings(hint_soruce="replay")  # a misspelt key is named, not ignored


def test_channel_losses_reach_metrics_jsonl(
    tiny_model: Path, prompts: Path, pairs: Path, tmp_path: Path
) -> None:
    s = _settings(steps=2, alpha=0.5, beta=0.5, pairs=pairs)
    out = train(tiny_model, prompts, tmp_path / "a", s, progress=False)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["phase"] for r in rows] == ["composite", "composite"]
    for row in rows:
        losses = [row[f"loss_{name}"] for name in sorted(CHANNELS)]
        assert all(math.isfinite(v) for v in losses), row
        # Every step, `loss` is the weighted sum of the logged channels.
        weighted = row["loss_grpo"] + 0.5 * (row["loss_self_distill"] + row["loss_replay_dpo"])
        assert row["loss"] == pytest.approx(weighted, rel=1e-5, abs=1e-6)
    assert (out / "adapter_config.json").is_file()


def test_replay_dpo_needs_pairs_and_the_template_its_hint(tmp_path: Path) -> None:
    # in the loop the replay phase may supply the pairs, so the train command checks them
    with pytest.raises(InputError, match="needs train.composite.pairs"):
        train(tmp_path / "base", tmp_path / "data.jsonl", tmp_path / "out", _settings(beta=0.1))
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValidationError, match="must contain"):
        _settings(hint_template="no placeholder")
