"""The DiLoCo settings of loop.yaml's `train:` section (`train.diloco`).

    train:
      method: sft
      steps: 60              # inner steps per replica
      batch_size: 16         # rows per inner step, over all replicas (8 each here)
      diloco: {replicas: 2, inner_steps: 10, outer_lr: 0.5, outer_momentum: 0.5}

Models only, a docstring under each field (as `config.models`);
`tuneloop.train.distributed.diloco` acts on them. `replicas: 0` (the default) leaves DiLoCo
off. The outer optimizer is SGD with Nesterov momentum, as in the DiLoCo paper (Douillard et
al. 2023). Deliberately not the paper's lr 0.7 / momentum 0.9, chosen there for H = 500: at
H = 10 on the arith demo (200 steps) it diverged (final loss 1.91 against DDP's 0.57), while
lr 0.5 / momentum 0.5 — an effective step of about lr / (1 - momentum) = 1, plain
averaging's — ended within 0.1% of DDP.
"""

from __future__ import annotations

from pydantic import Field

from tuneloop.config.base import Section


class DilocoConfig(Section):
    replicas: int = Field(default=0, ge=0)
    """Replica groups, one training process each, synchronised by torchft's DiLoCo every
    `inner_steps`; 0 turns DiLoCo off. Only `method: sft` trains this way."""
    inner_steps: int = Field(default=10, gt=0)
    """H: inner optimizer steps between two outer steps; `train.steps` must be a multiple."""
    outer_lr: float = Field(default=0.5, gt=0)
    """Learning rate of the outer SGD on the averaged pseudo-gradients."""
    outer_momentum: float = Field(default=0.5, ge=0, lt=1)
    """Nesterov momentum of the outer SGD (0 = plain averaging step)."""
    lighthouse: str | None = None
    """Address of a running torchft lighthouse (`http://host:29510`, started with
    `torchft_lighthouse --min_replicas 1`); None starts one on this machine for the run."""
    join_timeout_s: float = Field(default=30.0, gt=0)
    """How long the lighthouse waits for a live replica that has not yet asked to join a
    round, before forming the round without it (only for a lighthouse started here)."""
    timeout_s: float = Field(default=30.0, gt=0)
    """Timeout of one allreduce, commit vote or recovery transfer; a replica that does not
    answer within it is left out of the round."""
    max_restarts: int = Field(default=3, ge=0)
    """Times the launcher restarts a replica that dies (crash, kill -9); a restarted replica
    rejoins and recovers its state from a live peer."""
