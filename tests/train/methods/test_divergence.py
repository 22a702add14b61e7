"""Reference values of each distillation divergence on a three-token vocabulary.

Two positions with explicit probabilities (student s, teacher t), a third masked out:

    position 1: s = (0.5, 0.3, 0.2), t = (0.2, 0.5, 0.3)
    position 2: s = (0.1, 0.1, 0.8), t = (0.6, 0.2, 0.2)

The expected numbers were computed by hand (natural log) and agree with scipy's
`rel_entr` and `jensenshannon` (which returns the square root of JS, so it is squared here),
which the tests also call. E.g. reverse KL at position 1:
0.5 ln(0.5/0.2) + 0.3 ln(0.3/0.5) + 0.2 ln(0.2/0.3) = 0.458145 − 0.153248 − 0.081093 = 0.223805.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon
from scipy.special import rel_entr

from tuneloop.train.methods.divergence import (
    Divergence,
    divergence_loss,
    masked_mean,
    token_divergence,
)

STUDENT = [[0.5, 0.3, 0.2], [0.1, 0.1, 0.8], [0.3, 0.3, 0.4]]
TEACHER = [[0.2, 0.5, 0.3], [0.6, 0.2, 0.2], [0.9, 0.05, 0.05]]
MASK = [1.0, 1.0, 0.0]

REFERENCE = {
    # (kind, beta): (position 1, position 2)
    ("reverse_kl", 0.5): (0.22380465718564752, 0.8605448239171124),
    ("forward_kl", 0.5): (0.19379419794061364, 0.9364262454248438),
    ("jsd", 0.5): (0.05087461253959835, 0.2039281321456863),
    ("jsd", 0.25): (0.037065173559481066, 0.1587199058991196),
    ("jsd", 0.0): (0.19379419794061364, 0.9364262454248438),  # = forward KL (TRL's endpoint)
    ("jsd", 1.0): (0.22380465718564752, 0.8605448239171124),  # = reverse KL
}


def _log(probs: list[list[float]]):  # type: ignore[no-untyped-def]
    import torch

    return torch.tensor(probs, dtype=torch.float64).log()


def _scipy(kind: str, beta: float, s: list[float], t: list[float]) -> float:
    """The same divergence from scipy, independently of our code."""
    sa, ta = np.array(s), np.array(t)
    if kind == "reverse_kl" or (kind == "jsd" and beta == 1):
        return float(rel_entr(sa, ta).sum())
    if kind == "forward_kl" or (kind == "jsd" and beta == 0):
        return float(rel_entr(ta, sa).sum())
    m = beta * ta + (1 - beta) * sa
    return float(beta * rel_entr(ta, m).sum() + (1 - beta) * rel_entr(sa, m).sum())


@pytest.mark.parametrize(("kind", "beta"), list(REFERENCE))
def test_each_divergence_has_its_reference_value_per_token(kind: str, beta: float) -> None:
    got = token_divergence(_log(STUDENT), _log(TEACHER), Divergence(kind, beta))  # type: ignore[arg-type]
    for position, expected in enumerate(REFERENCE[kind, beta]):
        assert got[position].item() == pytest.approx(expected, rel=1e-12)
        assert expected == pytest.approx(
            _scipy(kind, beta, STUDENT[position], TEACHER[position]), rel=1e-12
        )


def test_the_symmetric_jsd_is_scipys_jensen_shannon_squared_and_at_most_ln_2() -> None:
    got = token_divergence(_log(STUDENT), _log(TEACHER), Divergence("jsd", 0.5))
    for position in range(3):
        js = jensenshannon(STUDENT[position], TEACHER[position]) ** 2  # natural log by default
        assert got[position].item() == pytest.approx(js, rel=1e-9)
        assert got[position].item() <= math.log(2)


def test_the_loss_is_the_mean_over_masked_tokens_not_over_sequences() -> None:
    import torch

    mask = torch.tensor(MASK, dtype=torch.float64)
    for (kind, beta), (first, second) in REFERENCE.items():
        d = Divergence(kind, beta)  # type: ignore[arg-type]
        loss = divergence_loss(_log(STUDENT), _log(TEACHER), mask, d)
        assert loss.item() == pytest.approx((first + second) / 2, rel=1e-6)  # float32 inside
    # Two sequences of 3 and 1 counted tokens: the mean is over the 4 tokens (each weighs
    # 1/4), not the mean of the two sequence means.
    per_token = torch.tensor([[1.0, 2.0, 3.0], [10.0, 0.0, 0.0]])
    lengths = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    assert masked_mean(per_token, lengths).item() == pytest.approx(16 / 4)
    assert masked_mean(per_token, torch.zeros_like(lengths)).item() == 0.0  # nothing counted


def test_jsd_tends_to_each_kl_scaled_by_its_weight_near_the_endpoints() -> None:
    """JSD_β / β → KL(teacher ‖ student) as β → 0 and JSD_β / (1 − β) → KL(student ‖ teacher)
    as β → 1 (Agarwal et al. 2024, §3); TRL's endpoints are those KLs unscaled."""
    s, t = _log(STUDENT), _log(TEACHER)
    forward, reverse = REFERENCE["forward_kl", 0.5], REFERENCE["reverse_kl", 0.5]
    eps = 1e-5
    near_zero = token_divergence(s, t, Divergence("jsd", eps)) / eps
    near_one = token_divergence(s, t, Divergence("jsd", 1 - eps)) / eps
    for position in range(2):
        assert near_zero[position].item() == pytest.approx(forward[position], rel=1e-3)
        assert near_one[position].item() == pytest.approx(reverse[position], rel=1e-3)


@pytest.mark.parametrize("beta", [0.0, 0.25, 0.5, 0.9, 1.0])
def test_jsd_is_trls_gkd_generalized_jsd_loss(beta: float) -> None:
    """The convention is TRL's `GKDTrainer.generalized_jsd_loss` (GKD, Eq. 1): same values on
    random logits for every beta, endpoints included."""
    import warnings

    import torch

    with warnings.catch_warnings():  # "you are importing from trl.experimental"
        warnings.simplefilter("ignore")
        from trl.experimental.gkd.gkd_trainer import GKDTrainer

    torch.manual_seed(0)
    student, teacher = torch.randn(2, 4, 7), torch.randn(2, 4, 7)
    labels = torch.tensor([[1, 1, -100, -100], [1, 1, 1, -100]])
    theirs = GKDTrainer.generalized_jsd_loss(student, teacher, labels=labels, beta=beta)
    ours = divergence_loss(student, teacher, (labels != -100).float(), Divergence("jsd", beta))
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-5)


def test_top_k_renormalises_both_sides_over_the_teachers_top_k() -> None:
    """k = 2 at position 1: the teacher's top two are tokens 2 and 3, so s' = (0.3, 0.2)/0.5
    and t' = (0.5, 0.3)/0.8, and reverse KL = 0.6 ln(0.6/0.625) + 0.4 ln(0.4/0.375)."""
    s, t = _log(STUDENT), _log(TEACHER)
    top2 = token_divergence(s, t, Divergence("reverse_kl", top_k=2))
    expected = 0.6 * math.log(0.6 / 0.625) + 0.4 * math.log(0.4 / 0.375)
    assert expected == pytest.approx(0.0013222117428754523, rel=1e-12)
    assert top2[0].item() == pytest.approx(expected, rel=1e-9)
    # k at least the vocabulary is the full divergence; the bias of a smaller k is large here
    full = token_divergence(s, t, Divergence("reverse_kl", top_k=3))
    assert full[0].item() == pytest.approx(REFERENCE["reverse_kl", 0.5][0], rel=1e-9)
    assert top2[0].item() < full[0].item() / 100


def test_the_teacher_gets_no_gradient_and_the_student_does() -> None:
    import torch

    student = _log(STUDENT).clone().requires_grad_(True)
    teacher = _log(TEACHER).clone().requires_grad_(True)
    for kind in ("reverse_kl", "forward_kl", "jsd"):
        student.grad = teacher.grad = None
        loss = divergence_loss(student, teacher.detach(), torch.tensor(MASK), Divergence(kind))  # type: ignore[arg-type]
        loss.backward()
        assert student.grad is not None and student.grad[:2].abs().sum() > 0
        assert student.grad[2].abs().sum() == 0  # the masked position
        assert teacher.grad is None


def test_the_config_offers_exactly_the_choices_the_code_knows() -> None:
    """`train.composite`'s menus (config is core and cannot import train) spell the same
    names as the code that reads them."""
    from typing import get_args

    from tuneloop.config.train import CompositeConfig
    from tuneloop.train.methods.divergence import DivergenceKind
    from tuneloop.train.methods.selfdistill import Placement, TeacherWeights

    fields = CompositeConfig.model_fields
    for name, known in (
        ("divergence", DivergenceKind),
        ("hint_placement", Placement),
        ("teacher", TeacherWeights),
    ):
        assert get_args(fields[name].annotation) == get_args(known), name
