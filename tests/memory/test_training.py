"""`memory/training.py`: the accounting on real shapes, and the estimate against measured peaks.

The pure tests pin the bytes per parameter the module docstring states. The measured test
trains a few real steps of the project's own SFT trainer (`tuneloop.train.methods.sft`) on
family-matrix models in a child process and compares the child's peak resident memory with
the estimate of the plan the preflight makes for the same `train:` section
(`loop/preflight/training_fit.training_plan`).

How it measures: the child loads the model and builds the trainer, then records its resident
set (`VmRSS`), resets the kernel's high-water mark (`/proc/self/clear_refs` ← 5, Linux) and
trains; the training's own memory is the high-water mark (`VmHWM`) less that resident set.
On models this small the fixed runtime (torch, transformers, TRL: ~0.5 GiB) would dwarf what
training adds, so the comparison is of what training adds — the estimate's `dynamic` part,
its peak less the weights and the runtime — and never of the totals. The child runs with
`MALLOC_MMAP_THRESHOLD_=65536`: glibc otherwise keeps freed megabyte-sized blocks in its heap
(its mmap threshold rises after each large free), and on models whose tensors are a few
megabytes that retention, not the tensors, would be what is measured; a real model's tensors
are larger than glibc's largest threshold (32 MiB) and are returned as they are freed without
it (`benchmarks/memory_plan.py` measures those with the default allocator).

The cells: the Llama family with a LoRA adapter at 16 rows × 512 tokens (the attention
masks and the checkpointed activations weigh most), and the Mistral family's 131,072-token
vocabulary at 2 rows × 128 tokens with LoRA and as a full fine-tune (the LM head's tiles
weigh most; the full fine-tune adds gradients and AdamW's moments).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tuneloop.config import TrainConfig
from tuneloop.loop.preflight.training_fit import training_plan
from tuneloop.memory import GIB, TrainingPlan, model_shape, training_memory

from .test_shape import QWEN2_05B

QWEN2_15B = {
    **QWEN2_05B,
    "hidden_size": 1536,
    "num_hidden_layers": 28,
    "num_attention_heads": 12,
    "intermediate_size": 8960,
}
"""Qwen2-1.5B's config.json: 2 kv heads, vocabulary 151,936, tied, like the 0.5B."""

CHILD = r"""
import gc, json, sys, tempfile
from pathlib import Path

def status(field):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024

base, settings = Path(sys.argv[1]), json.loads(sys.argv[2])
import torch
torch.set_num_threads(1)
from tuneloop.config import TrainConfig
from tuneloop.train.common import load_model, load_tokenizer, quiet
from tuneloop.train.methods.sft import build_sft_trainer
quiet()
s = TrainConfig(**settings)
long = " ".join(str(i % 10) for i in range(4 * s.max_length))
short = " ".join(str(i % 10) for i in range(s.max_length // 4))
rows = [
    {"messages": [{"role": "user", "content": "count"},
                  {"role": "assistant", "content": short if i % s.batch_size == 0 else long}]}
    for i in range(s.batch_size * s.steps)
]
trainer = build_sft_trainer(load_model(base, s), load_tokenizer(base), rows, s,
                            out_dir=Path(tempfile.mkdtemp()), nproc=1)
gc.collect()
before = status("VmRSS")
Path("/proc/self/clear_refs").write_text("5")
trainer.train()
print(json.dumps({"before": before, "peak": status("VmHWM")}))
"""

CELLS = [
    ("llama", "lora", 16, 512),
    ("mistral", "lora", 2, 128),
    ("mistral", "none", 2, 128),
]


def test_full_fine_tuning_in_float32_costs_16_bytes_a_parameter() -> None:
    shape = model_shape(QWEN2_05B)
    assert shape is not None
    need = training_memory(shape, TrainingPlan(rows=1, tokens=128, full=True))
    assert need.weights + need.gradients + need.optimizer == 16 * shape.parameters
    bf16 = training_memory(shape, TrainingPlan(1, 128, full=True, precision="bf16", gpu=True))
    assert bf16.weights + bf16.gradients + bf16.optimizer == 8 * shape.parameters  # no master


def test_lora_trains_a_float32_adapter_on_a_frozen_base() -> None:
    shape = model_shape(QWEN2_05B)
    assert shape is not None
    adapter = shape.lora_parameters(16, ())
    need = training_memory(shape, TrainingPlan(rows=1, tokens=128, full=False))
    assert need.weights == 4 * shape.parameters
    assert (need.gradients, need.optimizer) == (4 * adapter, 8 * adapter)
    nf4 = training_memory(shape, TrainingPlan(1, 128, full=False, precision="nf4", gpu=True))
    assert nf4.weights < need.weights / 2  # the blocks at 4 bits, the embedding in float32


def test_the_lm_head_works_in_tiles_that_stop_growing_at_4096_positions() -> None:
    shape = model_shape(QWEN2_05B)
    assert shape is not None

    def logits(rows: int, tokens: int) -> int:
        return training_memory(shape, TrainingPlan(rows, tokens, full=False)).logits

    assert logits(1, 257) == 256 * 32768 * 4 * 9  # nine float32 tiles on CPU
    assert logits(2, 257) == 2 * logits(1, 257)
    assert logits(8, 1025) == logits(16, 1025) == 4096 * 32768 * 4 * 9


def test_checkpointing_keeps_one_hidden_state_per_layer() -> None:
    shape = model_shape(QWEN2_05B)
    assert shape is not None
    on = training_memory(shape, TrainingPlan(4, 512, full=False, checkpointing=True))
    off = training_memory(shape, TrainingPlan(4, 512, full=False, checkpointing=False))
    assert off.activations > 10 * on.activations
    assert off.peak > on.peak


def test_sharding_divides_what_its_stage_says() -> None:
    shape = model_shape(QWEN2_05B)
    assert shape is not None
    ddp = training_memory(shape, TrainingPlan(1, 128, full=True))
    zero2 = training_memory(shape, TrainingPlan(1, 128, full=True, shards=4, zero_stage=2))
    fsdp = training_memory(shape, TrainingPlan(1, 128, full=True, shards=4, zero_stage=3))
    assert (zero2.weights, zero2.gradients, zero2.optimizer) == (
        ddp.weights,
        ddp.gradients // 4,
        ddp.optimizer // 4,
    )
    assert fsdp.weights == ddp.weights // 4


def test_a_float32_full_fine_tune_of_1_5b_fills_24_gib_and_lora_a_quarter() -> None:
    shape = model_shape(QWEN2_15B)
    assert shape is not None
    full = training_memory(shape, TrainingPlan(rows=1, tokens=128, full=True))
    lora = training_memory(shape, TrainingPlan(rows=1, tokens=128, full=False))
    assert 16 * shape.parameters > 23 * GIB  # weights, gradients and AdamW alone
    assert full.peak > 23.6 * GIB > 3 * lora.peak  # a 24 GiB machine has ~23.5 GiB of RAM


def measure(base: Path, settings: dict) -> int:
    """Bytes the child's training added to its resident set (module docstring)."""
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(base), json.dumps(settings)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    peaks = json.loads(done.stdout.strip().splitlines()[-1])
    return int(peaks["peak"] - peaks["before"])


@pytest.mark.skipif(
    not Path("/proc/self/clear_refs").exists(), reason="resets the peak RSS through Linux's /proc"
)
@pytest.mark.parametrize(("family", "adapter", "batch", "length"), CELLS)
def test_the_estimate_is_within_25_percent_of_the_measured_peak(
    family_model: Callable[[str], Path], family: str, adapter: str, batch: int, length: int
) -> None:
    base = family_model(family)
    settings = {
        "method": "sft",
        "adapter": adapter,
        "batch_size": batch,
        "max_length": length,
        "steps": 2,
        "learning_rate": 1e-4,
    }
    shape = model_shape(json.loads((base / "config.json").read_text()))
    assert shape is not None
    # the rows are longer than max_length: the preflight's plan, without counting them
    plan = training_plan(TrainConfig(**settings), gpu=False, longest=None)
    estimated = training_memory(shape, plan).dynamic
    measured = measure(base, settings)
    print(
        f"{family} {adapter} {batch}×{length}: measured {measured / 2**20:.0f} MiB, "
        f"estimated {estimated / 2**20:.0f} MiB, ratio {measured / estimated:.2f}"
    )
    assert 0.75 <= measured / estimated <= 1.25
