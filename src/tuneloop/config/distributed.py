"""How training runs on the hardware: loop.yaml's `train.distributed` section.

    train:
      nproc: 2                       # processes (one per GPU; gloo processes on CPU)
      adapter: lora                  # `none`: full fine-tuning, no adapter
      distributed: {launcher: accelerate, strategy: fsdp, gradient_checkpointing: true}

Models only, a docstring under each field (as `config.models`);
`tuneloop.train.distributed.launch` and `tuneloop.train.strategy` act on them. The process
count stays `train.nproc` (one setting, read by every launcher and by DiLoCo's refusal of DDP
inside a replica). The strategy goes to the TRL config (`fsdp`, `deepspeed`), so it means the
same under either launcher.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tuneloop.config.base import Section


class DistributedConfig(Section):
    launcher: Literal["torchrun", "accelerate"] = "torchrun"
    """What starts the `train.nproc` processes when there are more than one: `torchrun`
    (`python -m torch.distributed.run --standalone`) or `accelerate` (`accelerate launch` with a
    config file tuneloop writes beside the run)."""
    strategy: Literal["ddp", "fsdp", "deepspeed"] = "ddp"
    """`ddp`: every process holds the whole model; `fsdp`: parameters, gradients and optimizer
    state sharded over the processes (FSDP2, `fully_shard`); `deepspeed`: DeepSpeed ZeRO (needs
    the `deepspeed` package)."""
    deepspeed_stage: int = Field(default=2, ge=1, le=3)
    """ZeRO stage for `strategy: deepspeed` (1 optimizer state, 2 + gradients, 3 + parameters)."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass: less memory for about a third more compute."""
    bf16: bool | None = None
    """Train in bfloat16 (weights loaded in bfloat16 on a GPU, autocast on CPU); None = on a GPU
    only."""
    load_in_4bit: bool = False
    """QLoRA: load the frozen base in 4-bit NF4 (bitsandbytes) and train the LoRA adapter on
    it; needs a CUDA GPU, the `bitsandbytes` package and `train.adapter: lora`."""
