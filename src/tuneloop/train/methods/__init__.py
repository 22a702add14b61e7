"""The training methods; importing this package registers them in `tuneloop.registry.trainers`.

sft        (sft.py: TRL's SFTTrainer, loss on assistant turns only)
grpo       (grpo.py: TRL's GRPOTrainer, rewarded by the eval scorers (rewards.py), tool
           rollouts through the item's environment (toolenv.py))
dpo        (dpo.py: TRL's DPOTrainer)
composite  (composite.py: GRPO + α · self-distillation (selfdistill.py) + β · replay-DPO
           (preference.py))

`builtin.py` registers each as a trainer `(base, rows, out_dir, settings, **kw) -> None`. The
method modules load torch, transformers and TRL, so they are imported only when a trainer runs
or one of the names below is first used (PEP 562): importing this package, as the registry does
for `tuneloop check`, stays torch-free.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tuneloop.lazy import lazy_exports
from tuneloop.train.methods import builtin  # noqa: F401  (registers the built-in trainers)

if TYPE_CHECKING:
    from tuneloop.train.methods.composite import build_composite_trainer, train_composite
    from tuneloop.train.methods.dpo import train_dpo
    from tuneloop.train.methods.grpo import build_grpo_trainer, grpo_config, train_grpo
    from tuneloop.train.methods.rewards import scorer_reward
    from tuneloop.train.methods.sft import (
        build_sft_trainer,
        tokenize_with_mask,
        tokenized_rows,
        train_sft,
    )

_EXPORTS = {
    "build_composite_trainer": "composite",
    "train_composite": "composite",
    "train_dpo": "dpo",
    "build_grpo_trainer": "grpo",
    "grpo_config": "grpo",
    "train_grpo": "grpo",
    "scorer_reward": "rewards",
    "build_sft_trainer": "sft",
    "tokenize_with_mask": "sft",
    "tokenized_rows": "sft",
    "train_sft": "sft",
}
__all__ = [
    "build_composite_trainer",
    "build_grpo_trainer",
    "build_sft_trainer",
    "grpo_config",
    "scorer_reward",
    "tokenize_with_mask",
    "tokenized_rows",
    "train_composite",
    "train_dpo",
    "train_grpo",
    "train_sft",
]


__getattr__ = lazy_exports(__name__, _EXPORTS)
