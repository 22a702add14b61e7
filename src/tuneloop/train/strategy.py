"""`train.distributed`'s strategy and memory options, as TRL/transformers arguments.

The strategy travels in the TRL config (`fsdp=`, `deepspeed=`), the place transformers reads
it under any launcher; `check_strategy` refuses what cannot run (DeepSpeed or bitsandbytes
missing, 4-bit without a GPU, full fine-tuning where an adapter is needed) before any model is
loaded, naming the key and the package.

One deliberate deviation: accelerate (1.15) turns FSDP on only for accelerator processes
(`AcceleratorState` keeps `MULTI_CPU` and drops the FSDP plugin), so on CPU `fsdp` would
silently run as DDP. torch's FSDP2 (`fully_shard`) itself works over gloo, so `prepare` sets
the state accelerate sets on a GPU (distributed type FSDP, the plugin transformers built) and
the Trainer shards the model as it would there. `save_trained` gathers the sharded weights
into one full state dict (torch's `get_model_state_dict`) and clones them before saving:
on CPU the gathered tensors alias buffers FSDP frees again, which safetensors then rejects.
Not covered, and refused by `strategy_problems`: FSDP with GRPO's SFT warm-up or `composite`
(a second trainer over the already sharded model) and, on CPU, FSDP checkpoints (the same
freed buffers, inside transformers' checkpoint save).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

from tuneloop.errors import InputError, PhaseFailed
from tuneloop.train.settings import TrainSettings

FSDP_CONFIG = {"version": 2, "state_dict_type": "FULL_STATE_DICT", "reshard_after_forward": True}
"""FSDP2 with a full (unsharded) state dict at save time, one unit per transformer block."""


def on_gpu() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def installed(package: str) -> bool:
    return importlib.util.find_spec(package) is not None


def strategy_problems(s: TrainSettings, gpu: bool | None = None) -> list[tuple[str, str]]:
    """(config key, message) for each `train.distributed` / `train.adapter` setting that cannot
    run here; `gpu` None looks for one only when a setting needs it (importing torch)."""
    d, out = s.distributed, []
    if d.strategy == "deepspeed" and not installed("deepspeed"):
        out.append(
            (
                "train.distributed.strategy",
                "deepspeed needs the `deepspeed` package, which is not installed "
                "(pip install deepspeed); or use strategy: fsdp",
            )
        )
    if d.launcher == "accelerate" and not installed("accelerate"):
        out.append(("train.distributed.launcher", "accelerate is not installed"))
    if d.load_in_4bit:
        out += problems_4bit(s, on_gpu() if gpu is None else gpu)
    if d.strategy == "fsdp":
        out += problems_fsdp(s, gpu)
    if s.adapter == "none" and s.method == "composite":
        why = "its replay-DPO reference is the model with the adapter switched off"
        out.append(("train.adapter", f"none does not fit method composite ({why}); use lora"))
    if s.adapter == "none" and s.diloco.replicas > 0:
        out.append(("train.adapter", "none does not fit train.diloco (it trains LoRA)"))
    return out


def problems_4bit(s: TrainSettings, gpu: bool) -> list[tuple[str, str]]:
    key, out = "train.distributed.load_in_4bit", []
    lacks = [*([] if installed("bitsandbytes") else ["the `bitsandbytes` package"])]
    lacks += [] if gpu else ["a CUDA GPU"]
    if lacks:
        why = " and ".join(lacks)
        out.append((key, f"QLoRA needs {why}, which this machine lacks; or set it false"))
    if s.adapter != "lora":
        out.append((key, "QLoRA trains an adapter: set train.adapter: lora"))
    if s.distributed.strategy != "ddp":
        # sharding 4-bit weights needs bitsandbytes' quant-storage settings this path lacks
        out.append((key, f"QLoRA runs with strategy ddp here, not {s.distributed.strategy}"))
    return out


def problems_fsdp(s: TrainSettings, gpu: bool | None) -> list[tuple[str, str]]:
    """What FSDP does not cover here: a second trainer over an already sharded model (GRPO's
    SFT warm-up, composite's extra passes), and checkpoints on CPU (accelerate's FSDP save of
    a checkpoint reads buffers FSDP has freed, as `save_trained` works around at the end)."""
    key, out = "train.distributed.strategy", []
    if s.method == "composite" or (s.method == "grpo" and s.sft_warmup_steps > 0):
        what = "method composite" if s.method == "composite" else "train.sft_warmup_steps > 0"
        out.append((key, f"fsdp does not fit {what} (a second pass over the sharded model)"))
    if s.checkpoint.every > 0 and not (on_gpu() if gpu is None else gpu):
        out.append(
            (
                "train.checkpoint.every",
                "checkpoints of strategy fsdp need a GPU (on CPU accelerate's FSDP checkpoint "
                "save fails); set it to 0 or use strategy: ddp",
            )
        )
    return out


def check_strategy(s: TrainSettings, gpu: bool | None = None) -> None:
    """InputError naming every `strategy_problems` finding (before any model is loaded)."""
    problems = strategy_problems(s, gpu)
    if problems:
        raise InputError("; ".join(f"{key}: {message}" for key, message in problems))


def bf16_on(s: TrainSettings, gpu: bool) -> bool:
    return gpu if s.distributed.bf16 is None else s.distributed.bf16


def strategy_args(s: TrainSettings, gpu: bool) -> dict[str, Any]:
    """TRL config keyword arguments for the strategy, precision and checkpointing options."""
    d = s.distributed
    out: dict[str, Any] = {"bf16": bf16_on(s, gpu)}
    if d.strategy == "fsdp":
        cfg = dict(FSDP_CONFIG, activation_checkpointing=d.gradient_checkpointing)
        out |= {"fsdp": "full_shard auto_wrap", "fsdp_config": cfg}
    elif d.gradient_checkpointing:
        out |= {
            "gradient_checkpointing": True,
            "gradient_checkpointing_kwargs": {"use_reentrant": False},
        }
    if d.strategy == "deepspeed":
        out["deepspeed"] = deepspeed_config(d.deepspeed_stage)
    return out


def deepspeed_config(stage: int) -> dict[str, Any]:
    """A ZeRO config whose sizes transformers fills from the training arguments (`auto`)."""
    return {
        "zero_optimization": {"stage": stage},
        "bf16": {"enabled": "auto"},
        "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": "auto",
        "gradient_clipping": "auto",
        "train_batch_size": "auto",
    }


def prepare(trainer: Any) -> None:
    """Turn FSDP on for CPU processes, where accelerate drops it (see the module docstring)."""
    args = trainer.args
    if not args.fsdp or trainer.is_fsdp_enabled or args.fsdp_plugin_args is None:
        return
    from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin

    state = trainer.accelerator.state
    if state.distributed_type != DistributedType.MULTI_CPU:
        return
    state.distributed_type = DistributedType.FSDP
    state.fsdp_plugin = FullyShardedDataParallelPlugin(**args.fsdp_plugin_args)
    trainer.is_fsdp_enabled = True


def save_trained(trainer: Any, out_dir: Path) -> None:
    """Save the adapter (or, for `train.adapter: none`, the whole model) to `out_dir`."""
    if trainer.args.fsdp and world_size() > 1 and not sharded(trainer.model):
        # what accelerate did on CPU before `prepare`: FSDP asked for, DDP run, nothing said
        raise PhaseFailed(
            "train.distributed.strategy: fsdp, but the model was not sharded (accelerate ran "
            f"{trainer.accelerator.state.distributed_type}); no adapter was saved"
        )
    if not trainer.is_fsdp_enabled:
        trainer.save_model(str(out_dir))
        return
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    full: dict[str, Any] = dict(get_model_state_dict(trainer.model, options=options))
    if trainer.args.should_save:
        state = {k: v.detach().clone() for k, v in full.items()}
        model = trainer.accelerator.unwrap_model(trainer.model)
        model.save_pretrained(str(out_dir), state_dict=state)
        if trainer.processing_class is not None:
            trainer.processing_class.save_pretrained(str(out_dir))
    trainer.accelerator.wait_for_everyone()


def sharded(model: Any) -> bool:
    """True when FSDP2 holds `model`'s parameters as DTensor shards."""
    from torch.distributed.tensor import DTensor

    return any(isinstance(p, DTensor) for p in model.parameters())
