"""The distillation divergences of self-distillation, per token, from log-probabilities.

    per_token = token_divergence(student_logp, teacher_logp, Divergence("jsd", beta=0.5))
    loss = masked_mean(per_token, mask)

`student_logp` and `teacher_logp` are log-softmaxed logits (…, V); the result drops the
vocabulary axis. The teacher is a stop-gradient target: callers pass it detached.

- `reverse_kl`: KL(student ‖ teacher) = Σ_v p_s (log p_s − log p_t). Mode-seeking: the loss is
  measured where the student puts mass.
- `forward_kl`: KL(teacher ‖ student) = Σ_v p_t (log p_t − log p_s). Mass-covering.
- `jsd`: the generalised Jensen-Shannon divergence of GKD (Agarwal et al. 2024, "On-Policy
  Distillation of Language Models", Eq. 1), in TRL's convention (`GKDTrainer.
  generalized_jsd_loss`, trl 1.16, `trl/experimental/gkd/gkd_trainer.py`), with P the
  teacher and Q the student:

      M = β·P + (1 − β)·Q,   JSD_β = β·KL(P ‖ M) + (1 − β)·KL(Q ‖ M).

  As there, the endpoints are the two KLs themselves, unscaled: β = 0 is `forward_kl` and
  β = 1 is `reverse_kl`. Between them JSD_β is bounded by the entropy of the mixture weights
  (ln 2 at β = 0.5) and vanishes at both ends (JSD_β / β → KL(P ‖ Q) as β → 0), so a `jsd`
  loss near an endpoint is much smaller than the KL it tends to and needs a larger α.

`top_k` (optional) keeps the teacher's k most likely tokens at each position and renormalises
both distributions over them. Its bias, stated because it is why the default is the full
vocabulary: the student's mass outside the teacher's top k is invisible to the loss, so
nothing pushes it down (reverse KL loses exactly the term that punishes the student for mass
the teacher does not support), and the teacher's tail is read as zero. It saves nothing that
the chunked computation (selfdistill.py) does not already save; it is here to compare with
top-k distillation recipes.
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

DivergenceKind = Literal["reverse_kl", "forward_kl", "jsd"]


class Divergence(NamedTuple):
    """Which divergence, and its knobs."""

    kind: DivergenceKind = "reverse_kl"
    beta: float = 0.5
    """`jsd` only: the teacher's weight in the mixture (module docstring)."""
    top_k: int | None = None
    """The teacher's top k tokens only, both sides renormalised; None = the full vocabulary."""


def _kl(log_p: Any, log_q: Any) -> Any:
    """Σ_v p (log p − log q) over the last axis."""
    return (log_p.exp() * (log_p - log_q)).sum(-1)


def token_divergence(student_logp: Any, teacher_logp: Any, d: Divergence) -> Any:
    """Pure: the divergence at each position (the module docstring's definitions)."""
    import math

    import torch

    if d.top_k is not None:
        student_logp, teacher_logp = top_k_renormalised(student_logp, teacher_logp, d.top_k)
    if d.kind == "reverse_kl" or (d.kind == "jsd" and d.beta == 1):
        return _kl(student_logp, teacher_logp)
    if d.kind == "forward_kl" or (d.kind == "jsd" and d.beta == 0):
        return _kl(teacher_logp, student_logp)
    mixture = torch.logsumexp(
        torch.stack([teacher_logp + math.log(d.beta), student_logp + math.log1p(-d.beta)]), dim=0
    )
    return d.beta * _kl(teacher_logp, mixture) + (1 - d.beta) * _kl(student_logp, mixture)


def top_k_renormalised(student_logp: Any, teacher_logp: Any, k: int) -> tuple[Any, Any]:
    """Both log-distributions restricted to the teacher's top `k` tokens and renormalised."""
    k = min(k, teacher_logp.size(-1))
    index = teacher_logp.topk(k, dim=-1).indices
    student = student_logp.gather(-1, index)
    teacher = teacher_logp.gather(-1, index)
    return student.log_softmax(-1), teacher.log_softmax(-1)


def masked_mean(per_token: Any, mask: Any) -> Any:
    """Pure: Σ per_token · mask / Σ mask — the mean over the batch's counted tokens (every
    token weighs the same, whatever its sequence's length: GKD's `batchmean` over labels)."""
    return (per_token * mask).sum() / mask.sum().clamp(min=1.0)


def divergence_loss(student_logits: Any, teacher_logits: Any, mask: Any, d: Divergence) -> Any:
    """Pure: `masked_mean` of `token_divergence` over full logits (B, T, V), float32."""
    student = student_logits.float().log_softmax(-1)
    teacher = teacher_logits.float().log_softmax(-1)
    return masked_mean(token_divergence(student, teacher, d), mask)
