"""What every training method shares: quiet libraries, model loading, LoRA and TRL arguments.

Deliberate choices: TRL/transformers' own tqdm bars, wandb and every other reporter are off
(`report_to="none"`); tuneloop draws one rich bar and writes metrics.jsonl itself. On CPU the
model trains in float32 (`use_cpu=True`, no bf16); on a GPU in bfloat16; `train.distributed`
(strategy.py) adds FSDP/DeepSpeed, gradient checkpointing and 4-bit loading. Checkpoints go to
`<out>/checkpoints/<stage>/` only when `train.checkpoint.every` asks (resume.py), and
transformers' `logging_nan_inf_filter` is off: it would log a NaN loss as the running mean, and
health.py must see it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tuneloop.errors import InputError
from tuneloop.train.resume import checkpoint_args, stage_dir
from tuneloop.train.settings import TrainSettings
from tuneloop.train.strategy import bf16_on, on_gpu, strategy_args


def quiet() -> None:
    """Silence library progress bars and warnings that would interleave with ours."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("WANDB_DISABLED", "true")
    import warnings

    import datasets
    import transformers

    # transformers 5 renamed gradient_checkpointing; TRL still uses the old name internally.
    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")

    datasets.disable_progress_bars()
    datasets.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()


def load_model(base: Path, s: TrainSettings | None = None) -> Any:
    """The base causal LM: float32 on CPU; on a GPU bfloat16 (unless `train.distributed.bf16`
    is false) or, for QLoRA (`load_in_4bit`), 4-bit NF4 prepared for k-bit training."""
    import torch
    from transformers import AutoModelForCausalLM

    gpu = on_gpu()
    half = bf16_on(s, gpu) if s is not None else gpu
    dtype = torch.bfloat16 if gpu and half else torch.float32
    if s is None or not s.distributed.load_in_4bit:
        return AutoModelForCausalLM.from_pretrained(str(base), dtype=dtype)
    from peft import prepare_model_for_kbit_training
    from transformers import BitsAndBytesConfig

    quant = BitsAndBytesConfig(
        load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=dtype
    )
    model = AutoModelForCausalLM.from_pretrained(str(base), quantization_config=quant)
    return prepare_model_for_kbit_training(
        model, use_gradient_checkpointing=s.distributed.gradient_checkpointing
    )


def load_tokenizer(base: Path) -> Any:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(base))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def lora_config(s: TrainSettings) -> Any:
    """PEFT's LoraConfig from `train.lora`; None for full fine-tuning (`train.adapter: none`)."""
    if s.adapter == "none":
        return None
    from peft import LoraConfig

    return LoraConfig(
        r=s.lora.r,
        lora_alpha=s.lora.alpha,  # type: ignore[arg-type]  # peft types int; floats work
        lora_dropout=s.lora.dropout,
        target_modules=s.lora.target_modules,
        task_type="CAUSAL_LM",
    )


def common_args(
    s: TrainSettings, out_dir: Path, steps: int, stage: str = "train"
) -> dict[str, Any]:
    """Keyword arguments shared by every TRL config (SFTConfig, GRPOConfig, DPOConfig).

    `stage` names the folder of this trainer's checkpoints (`sft`, `sft_warmup`, `grpo`, …).
    """
    gpu = on_gpu()
    if s.torch_threads:
        import torch

        torch.set_num_threads(s.torch_threads)
    return {
        "output_dir": str(stage_dir(out_dir, stage)),
        "max_steps": steps,
        "learning_rate": s.learning_rate,
        "lr_scheduler_type": s.lr_scheduler,
        "max_grad_norm": s.max_grad_norm,
        "warmup_steps": s.warmup_ratio,
        "seed": s.seed,
        "data_seed": s.seed,
        "logging_steps": 1,
        "logging_nan_inf_filter": False,
        **checkpoint_args(s.checkpoint),
        "report_to": "none",
        "disable_tqdm": True,
        "use_cpu": not gpu,
        **strategy_args(s, gpu),
        "gradient_accumulation_steps": 1,
        "dataloader_num_workers": 0,
        "ddp_find_unused_parameters": False,
        **s.extra,
    }


def per_device(total: int, nproc: int, what: str) -> int:
    """Split a global batch over processes; InputError if it does not divide."""
    if total % nproc:
        raise InputError(f"{what} ({total}) must be divisible by nproc ({nproc})")
    return total // nproc


def without_printer(trainer: Any) -> Any:
    """Drop transformers' PrinterCallback (it prints every log dict; we have metrics.jsonl)."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    return trainer
